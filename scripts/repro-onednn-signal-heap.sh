#!/usr/bin/env bash
# The heap corruption of the flaky SIGTERM test, reproduced with oneDNN alone
# (tests/repro/onednn_signal_heap.cpp): RUNS runs of SECONDS each, for a signal handler and for
# sigwait, under each of ONEDNN_MAX_CPU_ISA=AVX512_CORE, AVX2 and SSE41; prints how many ended
# clean and how the others ended. Needs g++ and libdnnl-dev. A run that hangs (a corrupted
# OpenMP barrier) is killed after 15 s and counted as "hang".
#   bash scripts/repro-onednn-signal-heap.sh [RUNS=10] [SECONDS=1]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
seconds=${2:-1}
bin=$(mktemp -d)/onednn_signal_heap
trap 'rm -rf "$(dirname "$bin")"' EXIT
g++ -O2 -std=c++20 -pthread tests/repro/onednn_signal_heap.cpp -ldnnl -o "$bin"
for mode in handler sigwait; do
  for isa in AVX512_CORE AVX2 SSE41; do
    clean=0
    declare -A ends=()
    for ((i = 0; i < runs; ++i)); do
      status=0
      out=$(ONEDNN_MAX_CPU_ISA=$isa timeout -s KILL 15 "$bin" "$mode" "$seconds" 2>&1) || status=$?
      if ((status == 0)); then
        clean=$((clean + 1))
      else
        case $status in
          137) why=hang ;;
          139) why=SIGSEGV ;;
          *) why=$(printf '%s\n' "$out" | grep -v "^$mode:" | head -1) ;;
        esac
        ends[$why]=$((${ends[$why]:-0} + 1))
      fi
    done
    line="$mode $isa: $clean of $runs clean"
    for why in "${!ends[@]}"; do line+="; ${ends[$why]} $why"; done
    echo "$line"
    unset ends
  done
done
