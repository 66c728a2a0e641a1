#!/usr/bin/env bash
# On the GPU machine, after benchmarks/gpu/run.sh has built Convoy in build-gpu/: fmnet trained
# for its 8 epochs with each activation layout (and batch norm through Convoy's kernels instead
# of cuDNN), one after the other; prints each run's result line and its steady epoch speed.
#   benchmarks/gpu/layouts.sh OUTDIR [PRECISION]
set -uo pipefail
out=${1:?usage: benchmarks/gpu/layouts.sh OUTDIR [fp32|bf16]}
precision=${2:-bf16}
source "$(dirname "$0")/common.sh"
train() {  # NAME ARGS...
  local name=$1; shift
  "$build/convoy" train --config configs/fmnet.yaml --set dataset.path="$data" --set output.dir="$out/runs" \
    --set device=cuda --set precision="$precision" --set name="$name" "$@" >"$out/$name.log" 2>&1
  echo "$name: $(grep -E '^done:' "$out/$name.log" | sed 's/; checkpoints.*//')," \
       "last epoch $(grep -E '^epoch 8/8' "$out/$name.log" | grep -oE '[0-9]+ img/s')"
}
echo "== fmnet $precision on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(date -u '+%F %H:%M UTC')"
train ${precision}_nchw --set layout=nchw
train ${precision}_nhwc --set layout=nhwc
CONVOY_CUDA_BN_KERNELS=1 train ${precision}_nhwc_bn_kernels --set layout=nhwc
CONVOY_CUDA_BN_KERNELS=1 train ${precision}_nchw_bn_kernels --set layout=nchw
