# Sourced by the script that measures the GPU machine's host CPU (cpu_layers.sh)
# with $out set: configures the build (run.sh, no tests) where there is none, sources common.sh,
# builds convoy and sets $convoy; say() prints with the script's name and seconds so far, img_s()
# each record's engine, case and img/s from a bench's results.json.
mkdir -p "$out"
[ -f build-gpu/build.ninja ] || CONVOY_GPU_TESTS=0 CONVOY_NVJPEG=OFF "$(dirname "${BASH_SOURCE[0]}")/run.sh" \
  "$out/configure" > "$out/configure.log" 2>&1
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
t0=$(date +%s)
say() { echo "[$(basename "$0") $(($(date +%s) - t0))s] $*"; }
img_s() {
  python3 - "$1" <<'PY'
import json, sys
print("  ".join("%s %s b%d %.1f" % (r["engine"], r["model"], r["batch"], r.get("images_per_second", 0))
                for r in json.load(open(sys.argv[1]))["records"]))
PY
}
cmake --build "$build" -j "$(nproc)" --target convoy > "$out/build.log" 2>&1 || { tail -n 30 "$out/build.log"; exit 1; }
convoy=$build/convoy
