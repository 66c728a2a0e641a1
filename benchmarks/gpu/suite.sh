#!/usr/bin/env bash
# On the GPU machine, after benchmarks/gpu/run.sh has built Convoy in build-gpu/: one bench
# suite, its table last. Outputs to OUTDIR (bench/ with results.json, bench.md, bench.err).
#   benchmarks/gpu/suite.sh OUTDIR SUITE [convoy bench options, e.g. --peers none]
set -uo pipefail
out=${1:?usage: benchmarks/gpu/suite.sh OUTDIR SUITE [bench options]}
suite=${2:?usage: benchmarks/gpu/suite.sh OUTDIR SUITE [bench options]}
shift 2
suite=$(cd "$(dirname "$suite")" && pwd)/$(basename "$suite")
source "$(dirname "$0")/common.sh"
export CONVOY_PYTHON=${CONVOY_PYTHON:-python3} PYTHONUNBUFFERED=1
cmake --build "$build" -j "$(nproc)" --target convoy > "$out/build-suite.log" 2>&1 || {
  tail -30 "$out/build-suite.log"; exit 1; }
"$build/convoy" bench --suite "$suite" --out "$out/bench" --no-chart "$@" > "$out/bench.md" 2> "$out/bench.err"
rc=$?
sed -n '/^| model/,/^$/p' "$out/bench.md"
grep -A12 "Convoy / " "$out/bench.md" | head -40
echo "bench exit $rc"
exit $rc
