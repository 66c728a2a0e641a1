#!/usr/bin/env bash
# The whole test suite once under AddressSanitizer + UndefinedBehaviorSanitizer, CPU build
# (-DCONVOY_CUDA=OFF) in $CONVOY_BUILD_DIR (default build-asan/). Any sanitizer report fails the
# test it happens in: UBSan halts on the first error, ASan's leak check runs at every exit.
# The tests that run the `convoy` binary pass this environment on to it. No suppressions are
# needed today (libgomp and oneDNN leak nothing LeakSanitizer sees); tests/sanitizers/lsan.supp
# is where one would go, with its reason. CI's -DCONVOY_CUDA=OFF configuration (.ci/run): about
# 34 minutes on 2 cores, the largest part of CI (2026-12-05: built in 950 s, then 1,069 s of
# tests; with -g instead of -g1 the build took 1,292 s on 2026-12-04; the slowest tests are the
# end-to-end runs of MobileNet/EfficientNet training and the torchvision ONNX imports, 1 - 2
# minutes each).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${CONVOY_BUILD_DIR:-build-asan}
root=$PWD
bash scripts/setup.sh --test
# -g1: line tables, all a report's stack trace needs (file:line, inlined frames included); full
# -g compiled ~23% slower and wrote objects twice the size.
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g1"
# exitcode: a report exits 86 (ASan) or 87 (UBSan), never 1, which the command-line tests
# expect of a clean InputError and would otherwise take for a pass. LeakSanitizer exits 23.
export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:exitcode=86${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=87${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$root/tests/sanitizers/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
start=$(date +%s)
# -O1: the build is the larger part of this script's time, and -O1 compiles much faster than
# Release's -O3 while keeping the stack traces exact.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
  -DCONVOY_CUDA=OFF -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
echo "sanitizers: built in $(( $(date +%s) - start )) s"
status=0
# Without the `slow` label: the CPU accuracy run (a training recipe's accuracy and its time bound,
# run by both ordinary builds) takes ~4x its time under ASan and adds no code the other
# end-to-end cases do not already run.
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" --timeout 1500 -LE slow || status=$?
echo "sanitizers: built and tested in $(( $(date +%s) - start )) s"
exit $status
