#!/usr/bin/env bash
# On the GPU machine, after benchmarks/gpu/run.sh has built this tree in build-gpu/: builds
# an earlier source tree BASE (e.g. `git archive <commit> | tar -x -C .base`, carried) the
# same way, then runs benchmarks/suites/ab.yaml and fmnet's bf16 training with each binary
# in turn (A, B, A, B), so that a refactoring's speed is compared in one run on one card.
#   benchmarks/gpu/ab.sh BASE OUTDIR
# SUITE=benchmarks/suites/resnet_gpu.yaml picks another suite, ROUNDS=1 one round each,
# FMNET=0 leaves fmnet's training out.
set -uo pipefail
base=$(cd "${1:?usage: benchmarks/gpu/ab.sh BASE OUTDIR}" && pwd)
out=${2:?usage: benchmarks/gpu/ab.sh BASE OUTDIR}
source "$(dirname "$0")/common.sh"
export CMAKE_PREFIX_PATH=$PWD/.deps/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
# The configure flags run.sh used (OpenCL stub and library included), applied to BASE.
flags=$(grep -E '^(CONVOY_|CMAKE_CUDA_ARCH|CMAKE_BUILD_TYPE|OpenCL_)[A-Za-z_]*:' "$build/CMakeCache.txt" |
  grep -Ev '^CONVOY_HAVE' | sed 's/^\([^:]*\):[A-Z]*=\(.*\)$/-D\1=\2/')
# shellcheck disable=SC2086
cmake -S "$base" -B "$base/build-gpu" -G Ninja -DCMAKE_CUDA_STANDARD=17 $flags > "$out/base-configure.log" 2>&1 &&
  cmake --build "$base/build-gpu" -j "$(nproc)" --target convoy > "$out/base-build.log" 2>&1 || {
  tail -30 "$out/base-configure.log" "$out/base-build.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" --target convoy > "$out/build-ab.log" 2>&1 || { tail -30 "$out/build-ab.log"; exit 1; }

declare -A bin=([A]="$base/build-gpu/convoy" [B]="$PWD/$build/convoy")
suite=${SUITE:-benchmarks/suites/ab.yaml}
rounds=$(seq 1 "${ROUNDS:-2}")
for round in $rounds; do
  for v in A B; do
    "${bin[$v]}" bench --suite "$suite" --out "$out/bench-$v$round" > "$out/bench-$v$round.md" 2>&1
    [ "${FMNET:-1}" = 0 ] || "${bin[$v]}" train --config configs/fmnet.yaml --set dataset.path="$data" --set output.dir="$out/runs-$v$round" \
      --set device=cuda --set precision=bf16 > "$out/fmnet-$v$round.log" 2>&1
  done
done
echo "== A = $base, B = this tree; $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(date -u '+%F %H:%M UTC')"
for v in A B; do
  [ "${FMNET:-1}" = 0 ] || for round in $rounds; do echo "fmnet bf16 $v$round: $(grep -E '^done:' "$out/fmnet-$v$round.log" | tail -1)"; done
done
python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
rows = {}
for v in "AB":
    for r in "123":
        path = os.path.join(out, f"bench-{v}{r}", "results.json")
        if not os.path.exists(path):
            print("missing", path); continue
        for c in json.load(open(path))["records"]:
            if c.get("engine", "convoy") != "convoy" or c.get("status") != "ok": continue
            key = (c["model"], c["mode"], c["batch"], c["device"], c["precision"])
            rows.setdefault(key, {}).setdefault(v, []).append(c["images_per_second"])
print(f"{'case':44} {'A img/s':>12} {'B img/s':>12} {'B/A':>6}")
for key, d in sorted(rows.items()):
    a, b = max(d.get("A", [0])), max(d.get("B", [0]))
    print(f"{' '.join(map(str, key)):44} {a:12.0f} {b:12.0f} {b / a if a else 0:6.2f}")
PY
