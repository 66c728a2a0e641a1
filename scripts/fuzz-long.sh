#!/usr/bin/env bash
# A long fuzzing run from an unpacked bundle (scripts/fuzz-bundle.sh): every target at once,
# the machine's cores (nproc, or $CONVOY_FUZZ_JOBS) shared out among them (or among the targets
# named in $CONVOY_FUZZ_TARGETS), each worker a
# libFuzzer process on the target's shared corpus until SECONDS have passed since the start
# (a worker that stops early, on a crash, starts again with the time left). Then a table per
# target: workers, executions (stat::number_of_executed_units of -print_final_stats=1, summed
# over every worker's runs), crashes (crash/leak/timeout/oom inputs saved), and the distinct
# "fuzz: not an InputError" reports (with CONVOY_FUZZ_KEEP_GOING=1 those print and go on
# instead of crashing). Exit 1 when anything was found.
#   convoy-fuzz/fuzz-long.sh DIR SECONDS     DIR: where corpora, crashes, logs and summary.txt go
# From the repository, after building build-fuzz/ (scripts/fuzz.sh): CONVOY_FUZZ_BUNDLE=build-fuzz/bundle.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 DIR SECONDS" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
bundle=${CONVOY_FUZZ_BUNDLE:-$here}
mkdir -p "$1"
dir=$(cd "$1" && pwd)
seconds=$2
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CONVOY_FUZZ_CONFIG_DIR="$bundle/configs"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
targets=()
for b in "$bundle"/bin/*_fuzz; do t=$(basename "$b"); targets+=("${t%_fuzz}"); done
if [ -n "${CONVOY_FUZZ_TARGETS:-}" ]; then  # a subset, e.g. the slow targets on more cores
  read -ra targets <<<"$CONVOY_FUZZ_TARGETS"
  for t in "${targets[@]}"; do [ -x "$bundle/bin/${t}_fuzz" ] || { echo "fuzz-long: no target $t" >&2; exit 2; }; done
fi
[ ${#targets[@]} -gt 0 ] || { echo "fuzz-long: no targets in $bundle/bin" >&2; exit 2; }
cores=${CONVOY_FUZZ_JOBS:-$(nproc)}
n=${#targets[@]}
start=$(date +%s)
deadline=$((start + seconds))
echo "fuzz-long: ${n} targets on ${cores} cores for ${seconds} s, into $dir"

# One worker: libFuzzer runs until the deadline, each run's log kept for its statistics.
worker() {
  local t=$1 w=$2 run=0 left
  while :; do
    left=$((deadline - $(date +%s)))
    [ "$left" -ge 2 ] || break
    "$bundle/bin/${t}_fuzz" "$dir/corpus/$t" "$bundle/corpus/$t" -max_total_time="$left" \
      -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 -artifact_prefix="$dir/crashes/$t/" \
      >"$dir/logs/$t/worker$w.run$run.log" 2>&1 || true
    run=$((run + 1))
  done
}

pids=()
for i in "${!targets[@]}"; do
  t=${targets[$i]}
  # cores / n each, the remainder one more to the first targets; at least one.
  workers=$((cores / n + (i < cores % n ? 1 : 0)))
  [ "$workers" -ge 1 ] || workers=1
  echo "$workers" >"$dir/.workers.$t"
  mkdir -p "$dir/corpus/$t" "$dir/crashes/$t" "$dir/logs/$t"
  for ((w = 0; w < workers; ++w)); do
    worker "$t" "$w" &
    pids+=($!)
  done
done
for p in "${pids[@]}"; do wait "$p" || true; done  # a worker killed from outside still counts

summary=$dir/summary.txt
found=0
{
  echo "convoy fuzz-long: $(date -u +%FT%TZ), ${seconds} s on ${cores} cores ($(nproc) online), $(uname -n)"
  [ -f "$bundle/MANIFEST" ] && head -1 "$bundle/MANIFEST"
  printf '%-14s %8s %6s %16s %12s %8s %10s %8s\n' target workers runs executions exec/s crashes not_input corpus
  for t in "${targets[@]}"; do
    logs=("$dir/logs/$t"/*.log)
    execs=$(cat "${logs[@]}" /dev/null | sed -n 's/^stat::number_of_executed_units: *//p' | awk '{s += $1} END {print s + 0}')
    runs=${#logs[@]}
    crashes=$(find "$dir/crashes/$t" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
    reports=$( (grep -h '^fuzz: not an InputError' "${logs[@]}" || true) | sort -u | wc -l)
    corpus=$(find "$dir/corpus/$t" -type f | wc -l)
    rate=$((execs / (seconds > 0 ? seconds : 1)))
    printf '%-14s %8s %6s %16s %12s %8s %10s %8s\n' "$t" "$(cat "$dir/.workers.$t")" "$runs" "$execs" "$rate" "$crashes" "$reports" "$corpus"
    [ "$crashes" -eq 0 ] && [ "$reports" -eq 0 ] || found=1
  done
  echo "executions: libFuzzer's stat::number_of_executed_units summed over each target's workers and runs;"
  echo "crashes: inputs in crashes/<target>/ (crash, leak, timeout, oom); not_input: distinct"
  echo "'fuzz: not an InputError' lines (CONVOY_FUZZ_KEEP_GOING=1); logs in logs/<target>/."
} | tee "$summary"
for t in "${targets[@]}"; do
  if [ -n "$(ls -A "$dir/crashes/$t")" ]; then
    echo "--- $t: $(ls "$dir/crashes/$t" | head -5 | tr '\n' ' ')" | tee -a "$summary"
    (grep -h -E 'ERROR: |SUMMARY|runtime error|fuzz: not an InputError' "$dir/logs/$t"/*.log || true) | sort | uniq -c |
      sort -rn | head -10 | tee -a "$summary"
  fi
done
echo "fuzz-long: summary in $summary ($(( $(date +%s) - start )) s)"
exit $found
