#!/usr/bin/env bash
# Sets up, builds, and runs the whole test suite (CTest/GoogleTest). Tests labelled
# `cuda` report themselves skipped, with the reason, where no GPU is usable.
# As scripts/build.sh: the build directory is $CONVOY_BUILD_DIR (default build/), and extra
# arguments go to cmake, e.g. CONVOY_BUILD_DIR=build-cpu bash scripts/test.sh -DCONVOY_CUDA=OFF
set -euo pipefail
cd "$(dirname "$0")/.."
build=${CONVOY_BUILD_DIR:-build}
bash scripts/setup.sh --test
# ONNX Runtime (npm's onnxruntime-node): the `onnx` tests and the bench peer's test run in it.
bash scripts/install-onnxruntime-node.sh
CONVOY_BUILD_DIR=$build bash scripts/build.sh "$@"
status=0
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" --output-junit ctest-junit.xml || status=$?
# Say why tests were skipped, so that a skip is never mistaken for a pass.
if [ -f "$build/ctest-junit.xml" ]; then
  awk '/<testcase /{match($0, /name="[^"]*"/); name=substr($0, RSTART+6, RLENGTH-7)}
       /: Skipped$/{getline reason; print "  skipped " name ": " reason}' "$build/ctest-junit.xml" |
    sed 's/&quot;/"/g; s/&apos;/'"'"'/g; s/&lt;/</g; s/&gt;/>/g; s/&amp;/\&/g' > "$build/skipped.txt"
  if [ -s "$build/skipped.txt" ]; then
    echo "$(wc -l < "$build/skipped.txt") tests skipped:"
    cat "$build/skipped.txt"
  fi
fi
exit $status
