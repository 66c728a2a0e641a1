#!/usr/bin/env bash
# On the GPU machine, after benchmarks/gpu/run.sh has built Convoy in build-gpu/: the
# H200 benchmark suite (suites/h200.yaml) (GPU and CPU, Convoy against PyTorch and ONNX Runtime) and the
# time-to-93% race against PyTorch. Outputs to OUTDIR.
#   benchmarks/gpu/bench.sh OUTDIR
set -uo pipefail
out=${1:?usage: benchmarks/gpu/bench.sh OUTDIR}
source "$(dirname "$0")/common.sh"
export CONVOY_PYTHON=${CONVOY_PYTHON:-python3} PYTHONUNBUFFERED=1
cmake --build "$build" -j "$(nproc)" --target convoy > "$out/build-bench.log" 2>&1 || {
  tail -30 "$out/build-bench.log"; exit 1; }
"$build/convoy" bench --suite benchmarks/suites/h200.yaml --out "$out/bench" > "$out/bench.md" 2> "$out/bench.err"
echo "bench exit $?"
CONVOY_BINARY=$build/convoy timeout 200 python3 benchmarks/time_to_accuracy.py --data "$data" --out "$out/tta" \
  > "$out/tta.txt" 2>&1
echo "time_to_accuracy exit $?"
cat "$out/bench.md"
tail -25 "$out/tta.txt"
