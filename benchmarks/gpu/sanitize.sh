#!/usr/bin/env bash
# On the GPU machine, after benchmarks/gpu/run.sh built build-gpu/: the CUDA test binaries
# under compute-sanitizer, the tests split into shards that run side by side on the one GPU
# (gtest's GTEST_TOTAL_SHARDS), each shard bounded in time. Per shard: the tests that passed
# or failed, the sanitizer's summary line, and the tests a timeout left unrun.
#   benchmarks/gpu/sanitize.sh OUTDIR TOOL SHARDS SECONDS [GTEST_FILTER]
#   e.g. benchmarks/gpu/sanitize.sh out racecheck 8 480
# CONVOY_SANITIZER_ARGS: more compute-sanitizer options, e.g. "--kernel-name kns=convoy" to check
# only Convoy's own kernels (racecheck runs cuDNN's far slower than they run plainly).
set -uo pipefail
out=${1:?usage: sanitize.sh OUTDIR memcheck|racecheck|synccheck|initcheck SHARDS SECONDS [FILTER]}
tool=${2:?tool}
shards=${3:?shards}
seconds=${4:?seconds}
filter=${5:-*}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../.."
root=$PWD
build=${CONVOY_GPU_BUILD_DIR:-build-gpu}
export LD_LIBRARY_PATH=$root/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CONVOY_FASHION_MNIST=$root/.deps/usr/share/datasets/fashion-mnist
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)

binaries=()
for b in convoy_cuda_tests convoy_nvjpeg_tests; do [ -x "$build/tests/$b" ] && binaries+=("$b"); done
t0=$(date +%s)
for b in "${binaries[@]}"; do
  for ((i = 0; i < shards; ++i)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout -k 10 "$seconds" \
      "$sanitizer" --tool "$tool" --error-exitcode 86 --print-limit 50 ${CONVOY_SANITIZER_ARGS:-} \
      "$build/tests/$b" --gtest_color=no --gtest_filter="$filter" > "$out/$tool.$b.$i.log" 2>&1 &
  done
done
wait

{
  echo "== compute-sanitizer $tool ${CONVOY_SANITIZER_ARGS:-}, $shards shards per binary, ${seconds} s each, $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"
  for log in "$out/$tool".*.log; do
    name=$(basename "$log" .log)
    started=$(grep -c '^\[ RUN      \]' "$log")
    ok=$(grep -c '^\[       OK \]' "$log")
    skipped=$(grep -c '^\[  SKIPPED \] [A-Z]' "$log")
    failed=$(grep '^\[  FAILED  \] [A-Za-z]' "$log" | grep -vc ' listed below')
    finished=$(grep -q '^\[==========\] .* ran\.' "$log" && echo yes || echo "NO (timeout: the test running then is unfinished)")
    line=$(grep -E "(ERROR|RACECHECK|SYNCCHECK|INITCHECK) SUMMARY" "$log" | tail -n 1 | sed 's/^========= //')
    echo "$name: started $started, ok $ok, skipped $skipped, failed $failed; finished: $finished; ${line:-no sanitizer summary}"
    grep '^\[  FAILED  \] [A-Za-z]' "$log" | grep -v ' listed below' | sed 's/^/    /' | sort -u | head -n 10
    [ "$finished" = yes ] || grep '^\[ RUN      \]' "$log" | tail -n 1 | sed 's/^/    unfinished: /'
  done
  echo "total: $(cat "$out/$tool".*.log | grep -c '^\[       OK \]') ok, $(cat "$out/$tool".*.log | grep '^\[  FAILED  \] [A-Za-z]' | grep -vc ' listed below') failed;" \
       "hazards/errors: $(grep -hE '(ERROR|RACECHECK|SYNCCHECK|INITCHECK) SUMMARY' "$out/$tool".*.log | grep -oE '[0-9]+ (errors|hazards)' | awk '{s += $1} END {print s + 0}');" \
       "$(($(date +%s) - t0)) s"
} > "$out/$tool-summary.txt"
cat "$out/$tool-summary.txt"
