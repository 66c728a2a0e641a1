#!/usr/bin/env bash
# Builds and runs probe_8bit.cpp on the GPU machine (issue 37): 8-bit convolution paths and their
# speed next to bf16 on ResNet-50's convolutions. Usage: benchmarks/gpu/probe_8bit.sh OUTDIR [SECONDS]
set -euo pipefail
out=${1:?OUTDIR}; mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
g++ -O2 -std=c++17 "$here/probe_8bit.cpp" -I/usr/local/cuda/include -L/usr/local/cuda/lib64 \
  -lcudnn -lcublasLt -lcudart -o "$out/probe_8bit"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv | tee "$out/gpu.txt"
"$out/probe_8bit" "${2:-420}" 2>&1 | tee "$out/probe_8bit.txt"
