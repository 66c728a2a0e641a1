#!/usr/bin/env bash
# On the GPU machine's host CPU: one inference case, Convoy beside ONNX Runtime at each team size,
# then Convoy alone under each NAME=VALUE variant (on every core), ROUNDS rounds in turn.
#   benchmarks/gpu/cpu_sweep.sh OUTDIR MODEL BATCH "THREADS..." [ROUNDS] ["NAME=VALUE[ NAME=VALUE]" ...]
#   benchmarks/gpu/cpu_sweep.sh /tmp/s resnet18 1 "8 12 16" 2 CONVOY_WINOGRAD_TILES=12
set -uo pipefail
usage="usage: benchmarks/gpu/cpu_sweep.sh OUTDIR MODEL BATCH \"THREADS...\" [ROUNDS] [NAME=VALUE ...]"
out=${1:?$usage} model=${2:?$usage} batch=${3:?$usage} teams=${4:?$usage} rounds=${5:-2}
shift $(($# < 5 ? $# : 5))
source "$(dirname "$0")/cpu_common.sh"
suite=$out/$model-b$batch.yaml
sed -e "s#\.\./\.\./models/#$PWD/models/#" -e "s/inference: \[1, 32\]/inference: [$batch]/" -e 's/max_seconds: 12/max_seconds: 5/' \
  benchmarks/suites/cpu.yaml | grep -v -e '{model' > "$suite.head"
{ sed -n '1,/^models:/p' "$suite.head"; echo "  - {model: $PWD/models/$model.yaml, inference: [$batch], training: []}"
  sed -n '/^devices:/,$p' "$suite.head"; } > "$suite"
rm -f "$suite.head"
say "$(lscpu | grep -m1 'Model name'), $(nproc) CPUs; $model b$batch"
for round in $(seq "$rounds"); do
  for t in $teams; do
    dir=$out/r$round-t$t
    "$convoy" bench --suite "$suite" --threads "$t" --peers onnxruntime --no-chart --out "$dir" > /dev/null 2> "$dir.err"
    say "round $round, $t threads: $(img_s "$dir/results.json" 2>&1 | tail -n 1)"
  done
  j=0
  for v in "$@"; do
    dir=$out/r$round-v$((++j))
    env $v "$convoy" bench --suite "$suite" --peers none --no-chart --out "$dir" > /dev/null 2> "$dir.err"
    say "round $round, $v: $(img_s "$dir/results.json" 2>&1 | tail -n 1)"
  done
done
say done
