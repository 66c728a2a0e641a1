#!/usr/bin/env bash
# On the GPU machine, after benchmarks/gpu/run.sh has configured build-gpu/: issue 37's accuracy
# rows. ResNet-18 and ResNet-50 (torchvision's, classifier resized to 10 classes) trained from
# scratch in bf16 on the Fashion-MNIST folder of 64x64 colour JPEGs (configs/
# fashion_mnist_folder_resnet18.yaml; ResNet-50 through --set model), EPOCHS epochs each; each
# checkpoint quantized for the GPU from 1,024 training images (convoy quantize --device cuda, int8
# by the 99.99th percentile, FP8 by max), then val accuracy in bf16, int8 and FP8 on the GPU.
# Exits 1 when an 8-bit row is more than 0.5 points under bf16 or does not run (point 3's bar).
#   benchmarks/gpu/eight_bit.sh OUTDIR [EPOCHS] [MODELS]     (defaults: 2, "resnet18 resnet50")
set -uo pipefail
out=${1:?usage: benchmarks/gpu/eight_bit.sh OUTDIR [EPOCHS] [MODELS]}
epochs=${2:-2}
models=${3:-resnet18 resnet50}
source "$(dirname "$0")/common.sh"
cmake --build "$build" -j "$(nproc)" --target convoy > "$out/build-8bit.log" 2>&1 || {
  tail -30 "$out/build-8bit.log"; exit 1; }
folder=$out/fmnist64
[ -d "$folder/val" ] || python3 scripts/datasets/fashion_mnist_to_folder.py --out "$folder" --input-dir "$data" \
  --workers "$(nproc)" > "$out/folder.log" 2>&1 || { tail -20 "$out/folder.log"; exit 1; }
echo "== 8-bit accuracy on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(date -u '+%F %H:%M UTC'), $epochs epochs"
accuracy() { grep -oE 'accuracy [0-9.]+%' "$1" | tail -1; }
percent() { accuracy "$1" | grep -oE '[0-9.]+'; }
# The bar (issue 37 point 3): each 8-bit top-1 within 0.5 points of the same checkpoint in bf16.
failed=0
verdict() {  # MODEL PRECISION: compares infer_MODEL_PRECISION.log with the bf16 run
  local base got
  base=$(percent "$out/infer_${1}_bf16.log") got=$(percent "$out/infer_${1}_$2.log")
  if [ -z "$base" ] || [ -z "$got" ]; then echo "    $2: FAIL (no accuracy to compare)"; failed=1; return; fi
  if python3 -c "import sys; sys.exit(0 if float('$base') - float('$got') <= 0.5 else 1)"; then
    echo "    $2: within 0.5 points of bf16 ($got% against $base%)"
  else
    echo "    $2: FAIL, $(python3 -c "print(round(float('$base') - float('$got'), 2))") points under bf16 ($got% against $base%)"
    failed=1
  fi
}
for m in $models; do
  run=$out/runs/$m
  "$build/convoy" train --config configs/fashion_mnist_folder_resnet18.yaml --set model="$PWD/models/$m.yaml" \
    --set name=$m --set dataset.path="$folder" --set output.dir="$out/runs" --set epochs="$epochs" \
    --set device=cuda > "$out/train_$m.log" 2>&1
  echo "$m (exit $?): $(grep -E '^done:' "$out/train_$m.log" | tail -1)"
  ckpt=$out/runs/$m/best.safetensors
  "$build/convoy" infer --device cuda --precision bf16 --model "$ckpt" --data image-folder:val --data-path "$folder" \
    > "$out/infer_${m}_bf16.log" 2>&1
  echo "    bf16 (exit $?): $(accuracy "$out/infer_${m}_bf16.log")"
  for p in int8 fp8; do
    "$build/convoy" quantize --device cuda --precision $p --model "$ckpt" --calibration image-folder:train \
      --data-path "$folder" --samples 1024 -o "$out/${m}_$p.safetensors" > "$out/quantize_${m}_$p.log" 2>&1 || {
      echo "    quantize $p failed:"; tail -5 "$out/quantize_${m}_$p.log"; failed=1; continue; }
    "$build/convoy" infer --device cuda --model "$out/${m}_$p.safetensors" --data image-folder:val \
      --data-path "$folder" > "$out/infer_${m}_$p.log" 2>&1
    echo "    $p (exit $?): $(accuracy "$out/infer_${m}_$p.log"); $(grep -E '^8-bit plan' "$out/infer_${m}_$p.log")"
    verdict "$m" "$p"
  done
done
[ "$failed" = 0 ] && echo "== every 8-bit row within 0.5 points of bf16" || echo "== FAILED: a row is more than 0.5 points under bf16, or did not run"
exit "$failed"
