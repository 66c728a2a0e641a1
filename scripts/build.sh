#!/usr/bin/env bash
# Configures and builds Convoy in $CONVOY_BUILD_DIR (default build/; CUDA when nvcc is found,
# for the H200's sm_90). Extra arguments go to cmake, e.g. -DCONVOY_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${CONVOY_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
