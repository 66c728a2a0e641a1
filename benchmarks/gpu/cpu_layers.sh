#!/usr/bin/env bash
# On the GPU machine's host CPU: where one CPU inference case's time goes in Convoy and in ONNX
# Runtime, layer by layer (benchmarks/cpu/layer_profile.py), then the two engines side by side
# REPEAT times, with Convoy also run without Winograd (CONVOY_WINOGRAD=0) and with oneDNN's
# choice of activation formats (CONVOY_BLOCKED_LAYOUT=0). Logs and raw profiles to OUTDIR.
#   benchmarks/gpu/cpu_layers.sh OUTDIR [MODEL] [BATCH] [REPEAT]      # resnet50 32 3
set -uo pipefail
out=${1:?usage: benchmarks/gpu/cpu_layers.sh OUTDIR [MODEL] [BATCH] [REPEAT]}
model=${2:-resnet50} batch=${3:-32} repeat=${4:-3}
source "$(dirname "$0")/cpu_common.sh"
suite=$out/case.yaml
cat > "$suite" <<YAML
name: layers
models:
  - {model: $PWD/models/$model.yaml, inference: [$batch], training: []}
devices: [cpu]
precisions: [fp32]
threads: 0
input_sets: 1
timing:
  warmup_iterations: 2
  warmup_seconds: 0.3
  round_seconds: 0.3
  min_rounds: 3
  max_rounds: 10
  stable_spread: 0.05
  max_seconds: 6
  latency_samples: 10
  latency_seconds: 0.5
peaks:
  cpu: auto
peers: [onnxruntime]
YAML
say "$model b$batch, $(nproc) threads: Convoy under ONEDNN_VERBOSE"
ONEDNN_VERBOSE=1 "$convoy" bench --suite "$suite" --peers none --out "$out/verbose" > "$out/convoy_verbose.log" 2> "$out/convoy_verbose.err"
say "ONNX Runtime's profiler"
python3 benchmarks/cpu/layer_profile.py ort --model "models/$model.yaml" --batch "$batch" --threads "$(nproc)" \
  --runs 20 --out "$out/ort_profile.json" > "$out/ort_profile.log" 2>&1 || tail -n 20 "$out/ort_profile.log"
rm -f "$out/ort_profile.onnx"
python3 benchmarks/cpu/layer_profile.py compare --convoy "$out/convoy_verbose.log" --ort "$out/ort_profile.json" \
  | tee "$out/compare.txt"
gzip -f "$out/convoy_verbose.log"

for i in $(seq "$repeat"); do
  for variant in default CONVOY_WINOGRAD=0 CONVOY_BLOCKED_LAYOUT=0; do
    peers=none envs=()
    if [ "$variant" = default ]; then peers=onnxruntime; else envs=("$variant"); fi
    dir=$out/run$i-${variant%%=*}
    env "${envs[@]}" "$convoy" bench --suite "$suite" --peers "$peers" --out "$dir" > /dev/null 2> "$dir.err"
    say "run $i $variant: $(img_s "$dir/results.json" 2>&1 | tail -n 1)"
  done
done
say done
