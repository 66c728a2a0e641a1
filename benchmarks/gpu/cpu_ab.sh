#!/usr/bin/env bash
# On the GPU machine's host CPU: Convoy with and without an environment switch (an experiment's
# A/B), alternating, ROUNDS rounds, with ONNX Runtime beside the first each round; batch-32
# ResNet-50 and ResNet-18 on every core unless a suite is given.
#   benchmarks/gpu/cpu_ab.sh OUTDIR "NAME=VALUE[ NAME=VALUE]" [ROUNDS] [SUITE]      # 4 rounds
set -uo pipefail
out=${1:?usage: benchmarks/gpu/cpu_ab.sh OUTDIR NAME=VALUE [ROUNDS] [SUITE]}
switch=${2:?usage: benchmarks/gpu/cpu_ab.sh OUTDIR NAME=VALUE [ROUNDS] [SUITE]}
rounds=${3:-4} suite=${4:-}
source "$(dirname "$0")/cpu_common.sh"
if [ -z "$suite" ]; then
  suite=$out/ab.yaml
  sed -e "s#\.\./\.\./models/#$PWD/models/#" -e 's/inference: \[1, 32\]/inference: [32]/' -e 's/max_seconds: 12/max_seconds: 6/' \
    benchmarks/suites/cpu.yaml | grep -v -e lenet5 -e fmnet > "$suite"
fi
say "$(lscpu | grep -m1 'Model name'), $(nproc) CPUs; A: as built, B: $switch"
for round in $(seq "$rounds"); do
  "$convoy" bench --suite "$suite" --peers onnxruntime --no-chart --out "$out/a$round" > /dev/null 2>&1
  say "round $round A: $(img_s "$out/a$round/results.json" 2>&1 | tail -n 1)"
  env $switch "$convoy" bench --suite "$suite" --peers none --no-chart --out "$out/b$round" > /dev/null 2>&1
  say "round $round B: $(img_s "$out/b$round/results.json" 2>&1 | tail -n 1)"
done
rm -rf "$out"/a[0-9]* "$out"/b[0-9]*  # the figures are in the lines above
say done
