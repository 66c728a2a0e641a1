#!/usr/bin/env bash
# On the GPU machine, after benchmarks/gpu/run.sh has built this tree in build-gpu/: the
# ResNet suite and fmnet's bf16 training with ReLU fusion off (A: CONVOY_FUSION=0, inference
# op by op: --no-cuda-graphs) and on (B: the defaults), alternating A B A B with one binary.
#   benchmarks/gpu/fusion_ab.sh OUTDIR       (SUITE=... another suite, ROUNDS=1 one round)
set -uo pipefail
out=${1:?usage: benchmarks/gpu/fusion_ab.sh OUTDIR}
source "$(dirname "$0")/common.sh"
suite=${SUITE:-benchmarks/suites/resnet_gpu.yaml}
convoy=$PWD/$build/convoy
cmake --build "$build" -j "$(nproc)" --target convoy > "$out/build-convoy.log" 2>&1 || { tail -30 "$out/build-convoy.log"; exit 1; }
for round in $(seq 1 "${ROUNDS:-2}"); do
  CONVOY_FUSION=0 "$convoy" bench --suite "$suite" --no-cuda-graphs --no-chart --out "$out/bench-A$round" > "$out/bench-A$round.md" 2>&1
  "$convoy" bench --suite "$suite" --no-chart --out "$out/bench-B$round" > "$out/bench-B$round.md" 2>&1
  for v in A B; do
    fusion=1; [ $v = A ] && fusion=0
    CONVOY_FUSION=$fusion "$convoy" train --config configs/fmnet.yaml --set dataset.path="$data" \
      --set output.dir="$out/runs-$v$round" --set device=cuda --set precision=bf16 > "$out/fmnet-$v$round.log" 2>&1
  done
done
echo "== A: fusion off, no CUDA graphs; B: defaults; $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(date -u '+%F %H:%M UTC')"
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
