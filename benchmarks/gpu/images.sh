#!/usr/bin/env bash
# On the GPU machine, after benchmarks/gpu/run.sh has configured build-gpu/: the image-data
# path of issue 10. Makes an ImageNet-like JPEG folder (1000 classes, 224-500 px) and Fashion-MNIST
# as a folder of 64x64 colour JPEGs, then measures
#   0. the nvJPEG tests (label nvjpeg): nvJPEG's crops against the CPU path's;
#   1. the loader alone (`convoy train --data-only`): decoded 224x224 training crops per second,
#      the CPU decoders (libjpeg-turbo on the workers) beside nvJPEG (dataset.decoder);
#   2. ResNet-50 bf16 training, batch 256, from synthetic data and from the JPEG folder with each
#      decoder (the folder must reach >= 95% of the synthetic images/s);
#   3. ResNet-18 trained from scratch on the Fashion-MNIST folder: test accuracy (>= 92%).
# Logs to OUTDIR; a summary is printed last, with every step that failed.
#   benchmarks/gpu/images.sh OUTDIR   (CONVOY_IMAGES_PARTS="tests loader r50 r18": which)
set -euo pipefail
out=${1:?usage: benchmarks/gpu/images.sh OUTDIR}
source "$(dirname "$0")/common.sh"
t0=$(date +%s)
say() { echo "[images.sh $(($(date +%s) - t0))s] $*"; }
failed=()
# step NAME LOG COMMAND...: runs it with its output in OUTDIR/LOG; a failure is noted, not fatal.
step() {
  local name=$1 log=$2
  shift 2
  say "$name"
  if ! "$@" > "$out/$log" 2>&1; then
    failed+=("$name (see $log)")
    say "FAILED: $name"; tail -n 5 "$out/$log" || true
  fi
}
cmake --build "$build" -j "$(nproc)" --target convoy convoy_nvjpeg_tests > "$out/build-images.log" 2>&1 || {
  tail -30 "$out/build-images.log"; exit 1; }
say "$(grep -h "Convoy: nvJPEG" "$out/configure.log" 2>/dev/null | tail -1 || echo "nvJPEG: see the configure log")"
convoy=$build/convoy
py=$(command -v python3)
work=${CONVOY_IMAGES_DIR:-/tmp/convoy-images}
mkdir -p "$work"
parts=" ${CONVOY_IMAGES_PARTS:-tests loader r50 r18} "
want() { [[ $parts == *" $1 "* ]]; }

want tests && step "nvJPEG tests" nvjpeg-tests.log "$build/tests/convoy_nvjpeg_tests" --gtest_color=no

say "make the ImageNet-like folder"
[ -d "$work/imagenet-like/val" ] || "$py" scripts/datasets/make_imagenet_like.py --out "$work/imagenet-like" \
  --classes 1000 --train-per-class 12 --val-per-class 1 --workers "$(nproc)" > "$out/make-imagenet-like.log" 2>&1
say "make the Fashion-MNIST folder"
[ -d "$work/fmnist64/val" ] || "$py" scripts/datasets/fashion_mnist_to_folder.py --input-dir "$data" \
  --out "$work/fmnist64" --size 64 --workers "$(nproc)" > "$out/make-fmnist64.log" 2>&1
du -sh "$work"/* > "$out/datasets.txt"

folder=(--config configs/resnet50.yaml --set dataset.path="$work/imagenet-like")
if want loader; then
  step "loader, CPU decoders" loader-cpu.log "$convoy" train "${folder[@]}" --data-only 120 --set dataset.decoder=cpu
  step "loader, CPU decoders, 8 workers" loader-cpu-8.log \
    "$convoy" train "${folder[@]}" --data-only 120 --set dataset.decoder=cpu --set dataset.workers=8
  step "loader, nvJPEG" loader-nvjpeg.log "$convoy" train "${folder[@]}" --data-only 120 --set dataset.decoder=nvjpeg
  step "loader, nvJPEG, 4 workers" loader-nvjpeg-4.log \
    "$convoy" train "${folder[@]}" --data-only 120 --set dataset.decoder=nvjpeg --set dataset.workers=4
  step "loader, nvJPEG + CPU (nvjpeg_workers 4)" loader-hybrid-4.log \
    "$convoy" train "${folder[@]}" --data-only 120 --set dataset.decoder=nvjpeg --set dataset.nvjpeg_workers=4
  step "loader, nvJPEG + CPU (nvjpeg_workers 8)" loader-hybrid-8.log \
    "$convoy" train "${folder[@]}" --data-only 120 --set dataset.decoder=nvjpeg --set dataset.nvjpeg_workers=8
  step "loader, nvJPEG's default backend" loader-nvjpeg-default.log \
    env CONVOY_NVJPEG_BACKEND=default "$convoy" train "${folder[@]}" --data-only 120 --set dataset.decoder=nvjpeg
  # Small images (64x64): whether nvJPEG's per-image cost makes the CPU the better choice there.
  small=(--config configs/fashion_mnist_folder_resnet18.yaml --set dataset.path="$work/fmnist64" --data-only 200)
  step "loader 64x64, CPU decoders" loader-small-cpu.log "$convoy" train "${small[@]}" --set dataset.decoder=cpu
  step "loader 64x64, nvJPEG" loader-small-nvjpeg.log "$convoy" train "${small[@]}" --set dataset.decoder=nvjpeg
fi

r50=(--config configs/resnet50.yaml --set output.dir="$out/runs" --set epochs=3 --set dataset.test_limit=1000
     --set schedule.warmup_epochs=0 --set output.log_every=10)
if want r50; then
  step "ResNet-50 from synthetic data" r50_synthetic.log "$convoy" train "${r50[@]}" --set name=r50_synthetic \
    --set dataset.kind=synthetic --set dataset.synthetic.size=12000
  step "ResNet-50 from the JPEG folder, the default decoder (auto)" r50_folder_auto.log "$convoy" train "${r50[@]}" \
    --set name=r50_folder_auto --set dataset.path="$work/imagenet-like"
  step "ResNet-50 from the JPEG folder, CPU decoders" r50_folder.log "$convoy" train "${r50[@]}" \
    --set name=r50_folder --set dataset.path="$work/imagenet-like" --set dataset.decoder=cpu
  step "ResNet-50 from the JPEG folder, nvJPEG" r50_folder_nvjpeg.log "$convoy" train "${r50[@]}" \
    --set name=r50_folder_nvjpeg --set dataset.path="$work/imagenet-like" --set dataset.decoder=nvjpeg
  step "ResNet-50 from the JPEG folder, nvJPEG + CPU" r50_folder_hybrid.log "$convoy" train "${r50[@]}" \
    --set name=r50_folder_hybrid --set dataset.path="$work/imagenet-like" --set dataset.decoder=nvjpeg \
    --set dataset.nvjpeg_workers=4
fi

want r18 && step "ResNet-18 on the Fashion-MNIST folder" r18_fmnist.log "$convoy" train \
  --config configs/fashion_mnist_folder_resnet18.yaml --set dataset.path="$work/fmnist64" --set output.dir="$out/runs"

{
  echo "== image data on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(nproc) cores, $(date -u '+%F %H:%M UTC')"
  cat "$out/datasets.txt"; tail -n 2 "$out/make-imagenet-like.log" 2>/dev/null || true
  [ -f "$out/nvjpeg-tests.log" ] && echo "nvJPEG tests: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/nvjpeg-tests.log" | tr '\n' ' ')"
  for l in loader-cpu loader-cpu-8 loader-nvjpeg loader-nvjpeg-4 loader-hybrid-4 loader-hybrid-8 loader-nvjpeg-default \
           loader-small-cpu loader-small-nvjpeg; do
    [ -f "$out/$l.log" ] || continue
    printf '%-22s %s  %s  %s\n' "$l:" "$(grep '^loader:' "$out/$l.log" || echo '(no figure)')" \
      "$(grep '^decoder:' "$out/$l.log" || true)" "$(grep -o 'decoding training images.*' "$out/$l.log" | head -1 || true)"
  done
  for r in r50_synthetic r50_folder_auto r50_folder r50_folder_nvjpeg r50_folder_hybrid r18_fmnist; do
    [ -f "$out/$r.log" ] || continue
    echo "$r: $(grep -E '^done:|error' "$out/$r.log" | tail -1 || true)"
    grep -E '^epoch [0-9]+/[0-9]+:' "$out/$r.log" | sed 's/^/    /' || true
  done
  [ ${#failed[@]} -eq 0 ] && echo "all steps ran" || printf 'FAILED: %s\n' "${failed[@]}"
  echo "total $(($(date +%s) - t0)) s"
} > "$out/images-summary.txt"
cat "$out/images-summary.txt"
[ ${#failed[@]} -eq 0 ]
