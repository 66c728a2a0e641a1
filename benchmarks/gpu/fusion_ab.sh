#!/usr/bin/env bash
# On the GPU machine, after benchmarks/gpu/run.sh has built this tree in build-gpu/: the
# ResNet suite and fmnet's bf16 training with ReLU fusion off (A: CONVOY_FUSION=0, inference
# op by op: --no-cuda-graphs) and on (B: the defaults), alternating A B A B with one binary.
#   benchmarks/gpu/fusion_ab.sh OUTDIR       (SUITE=... another suite, ROUNDS=1 one round)
# A_ENV and A_ARGS make A something else: A_ENV=CONVOY_CUDA_GRAPHS=0 A_ARGS= is training steps
# op by op against training steps replayed from CUDA graphs.
set -uo pipefail
out=${1:?usage: benchmarks/gpu/fusion_ab.sh OUTDIR}
source "$(dirname "$0")/common.sh"
suite=${SUITE:-benchmarks/suites/resnet_gpu.yaml}
convoy=$PWD/$build/convoy
a_env=${A_ENV-CONVOY_FUSION=0}
a_args=${A_ARGS---no-cuda-graphs}
cmake --build "$build" -j "$(nproc)" --target convoy > "$out/build-convoy.log" 2>&1 || { tail -30 "$out/build-convoy.log"; exit 1; }
for round in $(seq 1 "${ROUNDS:-2}"); do
  # shellcheck disable=SC2086
  env $a_env "$convoy" bench --suite "$suite" $a_args --no-chart --out "$out/bench-A$round" > "$out/bench-A$round.md" 2>&1
  "$convoy" bench --suite "$suite" --no-chart --out "$out/bench-B$round" > "$out/bench-B$round.md" 2>&1
  for v in A B; do
    ab_env=; [ $v = A ] && ab_env=$a_env
    # shellcheck disable=SC2086
    env $ab_env "$convoy" train --config configs/fmnet.yaml --set dataset.path="$data" \
      --set output.dir="$out/runs-$v$round" --set device=cuda --set precision=bf16 > "$out/fmnet-$v$round.log" 2>&1
  done
done
echo "== A: ${a_env:-(no environment)} ${a_args:-(no arguments)}; B: defaults; $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(date -u '+%F %H:%M UTC')"
for f in "$out"/fmnet-*.log; do echo "$(basename "$f" .log): $(grep -E '^done:|reached' "$f" | tail -2 | tr '\n' ' ')"; done
python3 - "$out" <<'PY'
import json, sys, os, glob
out = sys.argv[1]
rows = {}
for path in sorted(glob.glob(os.path.join(out, "bench-*", "results.json"))):
    v = os.path.basename(os.path.dirname(path))[6]
    for c in json.load(open(path))["records"]:
        if c.get("engine", "convoy") != "convoy" or c.get("status") != "ok": continue
        key = (c["model"], c["mode"], c["batch"], c["precision"])
        rows.setdefault(key, {}).setdefault(v, []).append((c["images_per_second"], c.get("p50_ms", 0)))
print(f"{'case':36} {'A img/s':>10} {'B img/s':>10} {'B/A':>6} {'A p50ms':>8} {'B p50ms':>8}")
for key, d in sorted(rows.items()):
    a = max(d.get("A", [(0, 0)])); b = max(d.get("B", [(0, 0)]))
    pa = min(x[1] for x in d.get("A", [(0, 0)])); pb = min(x[1] for x in d.get("B", [(0, 0)]))
    print(f"{' '.join(map(str, key)):36} {a[0]:10.0f} {b[0]:10.0f} {b[0] / a[0] if a[0] else 0:6.2f} {pa:8.3f} {pb:8.3f}")
PY
