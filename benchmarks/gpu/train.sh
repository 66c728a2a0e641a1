#!/usr/bin/env bash
# On the GPU machine, after benchmarks/gpu/run.sh has built Convoy in build-gpu/: trains
# fmnet (fp32 and bf16) and the default config on the GPU, fmnet for one epoch on the
# CPU path for comparison, and compares GPU and CPU top-1 predictions. Logs to OUTDIR.
#   benchmarks/gpu/train.sh OUTDIR
set -uo pipefail
out=${1:?usage: benchmarks/gpu/train.sh OUTDIR}
source "$(dirname "$0")/common.sh"
cmake --build "$build" -j "$(nproc)" --target convoy > "$out/build-train.log" 2>&1 || {
  tail -30 "$out/build-train.log"; exit 1; }
convoy=$build/convoy
common=(--set dataset.path="$data" --set output.dir="$out/runs")

summary() { echo "$1: $(grep -E '^done:' "$out/$2" | tail -1)"; }
"$convoy" doctor > "$out/doctor.txt" 2>&1
for precision in fp32 bf16; do
  "$convoy" train --config configs/fmnet.yaml "${common[@]}" --set device=cuda \
    --set precision=$precision --set name=fmnet_$precision > "$out/fmnet_$precision.log" 2>&1
done
"$convoy" train --config configs/fashion_mnist.yaml "${common[@]}" --set device=cuda \
  --set name=default_gpu > "$out/default_gpu.log" 2>&1
"$convoy" train --config configs/fmnet.yaml "${common[@]}" --set device=cpu --set epochs=1 \
  --set name=fmnet_cpu > "$out/fmnet_cpu.log" 2>&1
"$convoy" infer --device cpu --model "$out/runs/fmnet_bf16/best.safetensors" --data fashion-mnist:test \
  --data-path "$data" --predictions "$out/pred_cpu.txt" > "$out/infer_cpu.log" 2>&1
"$convoy" infer --device cuda --model "$out/runs/fmnet_bf16/best.safetensors" --data fashion-mnist:test \
  --data-path "$data" --predictions "$out/pred_gpu.txt" > "$out/infer_gpu.log" 2>&1

echo "== training on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(date -u '+%F %H:%M UTC')"
for f in fmnet_fp32 fmnet_bf16 default_gpu fmnet_cpu; do
  summary "$f" "$f.log"
  grep -E '^epoch [0-9]+/[0-9]+:' "$out/$f.log" | sed 's/^/    /'
done
echo "top-1 agreement GPU vs CPU: $(paste -d' ' "$out/pred_gpu.txt" "$out/pred_cpu.txt" | awk '$1==$2{s++} END{print s "/" NR}')"
