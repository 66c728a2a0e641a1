#!/usr/bin/env bash
# On the GPU machine's host CPU: the inference plan's activation formats against oneDNN's own
# choice (CONVOY_BLOCKED_LAYOUT=0) by team size, Convoy alone, ROUNDS rounds alternating, for
# the cases where a convolution runs as Winograd (batch 32); then oneDNN's verbose log of
# ResNet-50 at batch 32 on every core with oneDNN's choice (for benchmarks/cpu/layer_profile.py).
#   benchmarks/gpu/cpu_formats.sh OUTDIR [ROUNDS] [THREADS...]      # 2 rounds; 4 8 16 threads
set -uo pipefail
out=${1:?usage: benchmarks/gpu/cpu_formats.sh OUTDIR [ROUNDS] [THREADS...]}
rounds=${2:-2}
teams=("${@:3}")
[ ${#teams[@]} -eq 0 ] && teams=(4 8 16)
source "$(dirname "$0")/cpu_common.sh"
suite=$out/formats.yaml
sed -e "s#\.\./\.\./models/#$PWD/models/#" -e 's/inference: \[1, 32\]/inference: [32]/' -e 's/max_seconds: 12/max_seconds: 5/' \
  benchmarks/suites/cpu.yaml | grep -v lenet5 > "$suite"
say "$(lscpu | grep -m1 'Model name'), $(nproc) CPUs; cases: $(grep -c 'model:' "$suite")"
for round in $(seq "$rounds"); do
  for t in "${teams[@]}"; do
    for layout in blocked onednn; do
      envs=()
      [ "$layout" = onednn ] && envs=(CONVOY_BLOCKED_LAYOUT=0)
      dir=$out/r$round-t$t-$layout
      env "${envs[@]}" "$convoy" bench --suite "$suite" --peers none --threads "$t" --no-chart --out "$dir" \
        > /dev/null 2>&1
      say "round $round, $t threads, $layout: $(img_s "$dir/results.json" 2>&1 | tail -n 1)"
    done
  done
done
grep -v -e fmnet -e resnet18 "$suite" > "$out/resnet50.yaml"
CONVOY_BLOCKED_LAYOUT=0 ONEDNN_VERBOSE=1 "$convoy" bench --suite "$out/resnet50.yaml" --peers none --no-chart \
  --out "$out/verbose" > "$out/convoy_verbose_onednn.log" 2> /dev/null
gzip -f "$out/convoy_verbose_onednn.log"
rm -rf "$out"/r*-t* "$out/verbose"  # the figures are in the lines above
say done
