#!/usr/bin/env bash
# On the GPU machine, after benchmarks/gpu/run.sh has configured build-gpu/: the image-data
# path of issue 10. Makes an ImageNet-like JPEG folder (1000 classes, 224-500 px) and Fashion-MNIST
# as a folder of 64x64 colour JPEGs, then measures
#   1. the loader alone (`convoy train --data-only`): decoded 224x224 training crops per second;
#   2. ResNet-50 bf16 training, batch 256, from synthetic data and from the JPEG folder (the
#      folder must reach >= 95% of the synthetic images/s);
#   3. ResNet-18 trained from scratch on the Fashion-MNIST folder: test accuracy (>= 92%).
# Logs to OUTDIR.   benchmarks/gpu/images.sh OUTDIR   (CONVOY_IMAGES_PARTS="loader r50 r18": which)
set -uo pipefail
out=${1:?usage: benchmarks/gpu/images.sh OUTDIR}
source "$(dirname "$0")/common.sh"
t0=$(date +%s)
say() { echo "[images.sh $(($(date +%s) - t0))s] $*"; }
cmake --build "$build" -j "$(nproc)" --target convoy > "$out/build-images.log" 2>&1 || {
  tail -30 "$out/build-images.log"; exit 1; }
convoy=$build/convoy
py=$(command -v python3)
work=${CONVOY_IMAGES_DIR:-/tmp/convoy-images}
mkdir -p "$work"
parts=" ${CONVOY_IMAGES_PARTS:-loader r50 r18} "
want() { [[ $parts == *" $1 "* ]]; }

say "make the ImageNet-like folder"
[ -d "$work/imagenet-like/val" ] || "$py" scripts/datasets/make_imagenet_like.py --out "$work/imagenet-like" \
  --classes 1000 --train-per-class 12 --val-per-class 1 --workers "$(nproc)" > "$out/make-imagenet-like.log" 2>&1
say "make the Fashion-MNIST folder"
[ -d "$work/fmnist64/val" ] || "$py" scripts/datasets/fashion_mnist_to_folder.py --input-dir "$data" \
  --out "$work/fmnist64" --size 64 --workers "$(nproc)" > "$out/make-fmnist64.log" 2>&1
du -sh "$work"/* > "$out/datasets.txt"

want loader && say "loader alone" && {
"$convoy" train --config configs/resnet50.yaml --set dataset.path="$work/imagenet-like" --data-only 120 \
  > "$out/loader.log" 2>&1
"$convoy" train --config configs/resnet50.yaml --set dataset.path="$work/imagenet-like" --data-only 120 \
  --set dataset.workers=8 > "$out/loader-8.log" 2>&1
}

r50=(--config configs/resnet50.yaml --set output.dir="$out/runs" --set epochs=3 --set dataset.test_limit=1000
     --set schedule.warmup_epochs=0 --set output.log_every=10)
want r50 && say "ResNet-50 from synthetic data" && {
"$convoy" train "${r50[@]}" --set name=r50_synthetic --set dataset.kind=synthetic \
  --set dataset.synthetic.size=12000 > "$out/r50_synthetic.log" 2>&1
say "ResNet-50 from the JPEG folder"
"$convoy" train "${r50[@]}" --set name=r50_folder --set dataset.path="$work/imagenet-like" \
  > "$out/r50_folder.log" 2>&1
}

want r18 && say "ResNet-18 on the Fashion-MNIST folder" && {
"$convoy" train --config configs/fashion_mnist_folder_resnet18.yaml --set dataset.path="$work/fmnist64" \
  --set output.dir="$out/runs" > "$out/r18_fmnist.log" 2>&1
}

{
  echo "== image data on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(nproc) cores, $(date -u '+%F %H:%M UTC')"
  cat "$out/datasets.txt"; tail -n 2 "$out/make-imagenet-like.log"
  echo "loader (all cores): $(grep '^loader:' "$out/loader.log" 2>/dev/null)"
  echo "loader (8 workers): $(grep '^loader:' "$out/loader-8.log" 2>/dev/null)"
  for r in r50_synthetic r50_folder r18_fmnist; do
    [ -f "$out/$r.log" ] || continue
    echo "$r: $(grep -E '^done:|error' "$out/$r.log" | tail -1)"
    grep -E '^epoch [0-9]+/[0-9]+:' "$out/$r.log" | sed 's/^/    /'
  done
  echo "total $(($(date +%s) - t0)) s"
} > "$out/images-summary.txt"
cat "$out/images-summary.txt"
