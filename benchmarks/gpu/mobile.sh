#!/usr/bin/env bash
# On the GPU machine, after benchmarks/gpu/run.sh has configured build-gpu/: MobileNetV2 and
# EfficientNet-B0 (configs/fashion_mnist_folder_*.yaml) trained on the Fashion-MNIST folder at
# 224x224, bf16 channels-last, EPOCHS epochs each; then the CPU and the GPU infer the trained
# checkpoint over the val folder and their top-1 predictions are compared. Logs to OUTDIR.
#   benchmarks/gpu/mobile.sh OUTDIR [EPOCHS]        (default 3)
set -uo pipefail
out=${1:?usage: benchmarks/gpu/mobile.sh OUTDIR [EPOCHS]}
epochs=${2:-3}
source "$(dirname "$0")/common.sh"
cmake --build "$build" -j "$(nproc)" --target convoy > "$out/build-mobile.log" 2>&1 || {
  tail -30 "$out/build-mobile.log"; exit 1; }
folder=$out/fmnist64
python3 scripts/datasets/fashion_mnist_to_folder.py --out "$folder" --input-dir "$data" --workers "$(nproc)" \
  > "$out/folder.log" 2>&1 || { tail -20 "$out/folder.log"; exit 1; }
echo "== MobileNetV2 and EfficientNet-B0 on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(date -u '+%F %H:%M UTC'), $epochs epochs"
for m in mobilenet_v2 efficientnet_b0; do
  "$build/convoy" train --config configs/fashion_mnist_folder_$m.yaml --set dataset.path="$folder" \
    --set output.dir="$out/runs" --set epochs="$epochs" --set device=cuda > "$out/$m.log" 2>&1
  echo "$m (exit $?): $(grep -E '^done:' "$out/$m.log" | tail -1)"
  grep -E '^epoch [0-9]+/[0-9]+:' "$out/$m.log" | sed 's/^/    /'
  for device in cuda cpu; do
    "$build/convoy" infer --device $device --model "$out/runs/fashion_mnist_folder_$m/best.safetensors" \
      --data image-folder:val --data-path "$folder" --predictions "$out/pred_${m}_$device.txt" > "$out/infer_${m}_$device.log" 2>&1
    echo "    infer --device $device (exit $?): $(grep -iE 'accuracy|img/s' "$out/infer_${m}_$device.log" | tail -2 | tr '\n' ' ')"
  done
  echo "    top-1 agreement GPU vs CPU: $(paste -d' ' "$out/pred_${m}_cuda.txt" "$out/pred_${m}_cpu.txt" |
    awk '$1==$2{s++} END{print s "/" NR}')"
done
