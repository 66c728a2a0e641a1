#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/, clang + ASan + UBSan) in $CONVOY_FUZZ_BUILD_DIR
# (default build-fuzz/) and runs each for SECONDS_PER_TARGET (default 30), starting from the
# seeds in tests/fuzz/corpus/<target>/. Fails when any target finds a crash, leak, timeout or
# out-of-memory; the input that did it is left in <build>/crashes/<target>/ (replay it with
# `<build>/tests/fuzz/<target>_fuzz <file>`). New inputs found go to <build>/corpus/<target>/.
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET]    CONVOY_FUZZ_TARGETS="idx image" for a subset
#   bash scripts/fuzz.sh --seeds                 rewrites the binary seeds with the engine's writers
set -euo pipefail
cd "$(dirname "$0")/.."
build=${CONVOY_FUZZ_BUILD_DIR:-build-fuzz}
targets=${CONVOY_FUZZ_TARGETS:-safetensors idx image csv_manifest run_config model infer_request classify grpc_infer}
seconds=${1:-30}
bash scripts/setup.sh --test
start=$(date +%s)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCONVOY_CUDA=OFF -DCONVOY_TESTS=OFF \
  -DCONVOY_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ >/dev/null
if [ "$seconds" = --seeds ]; then
  cmake --build "$build" -j"$(nproc)" --target convoy_fuzz_make_seeds
  ASAN_OPTIONS=detect_leaks=0 "$build/tests/fuzz/convoy_fuzz_make_seeds" tests/fuzz/corpus
  exit 0
fi
cmake --build "$build" -j"$(nproc)" --target convoy_fuzz
echo "fuzz: built in $(( $(date +%s) - start )) s"

export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
failed=()
for t in $targets; do
  if [ ! -x "$build/tests/fuzz/${t}_fuzz" ]; then  # grpc_infer needs protobuf (libprotobuf-dev, protobuf-compiler)
    echo "fuzz: $t not built here (see $build's configure output); skipped"
    continue
  fi
  mkdir -p "$build/corpus/$t" "$build/crashes/$t"
  log="$build/crashes/$t/fuzz.log"
  status=0
  "$build/tests/fuzz/${t}_fuzz" "$build/corpus/$t" "tests/fuzz/corpus/$t" \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$build/crashes/$t/" >"$log" 2>&1 || status=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  if [ $status -ne 0 ]; then
    failed+=("$t")
    echo "fuzz: $t FAILED (exit $status) after ${execs:-?} runs; the input is in $build/crashes/$t/:"
    ls "$build/crashes/$t" | grep -v '^fuzz.log$' | sed 's/^/  /'
    grep -E 'ERROR|SUMMARY|fuzz: not an InputError|runtime error|#[0-9]+ 0x' "$log" | head -40 | sed 's/^/  /'
  else
    echo "fuzz: $t ok: ${execs:-?} runs in ${seconds} s (${rate:-?}/s), 0 crashes"
  fi
done
echo "fuzz: done in $(( $(date +%s) - start )) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: crashes in: ${failed[*]} (logs: $build/crashes/<target>/fuzz.log)"
  exit 1
fi
