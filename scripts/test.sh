#!/usr/bin/env bash
# Sets up, builds, and runs the whole test suite (CTest/GoogleTest). Tests labelled
# `cuda` report themselves skipped, with the reason, where no GPU is usable.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)"
