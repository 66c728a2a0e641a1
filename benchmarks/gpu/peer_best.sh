#!/usr/bin/env bash
# On the GPU machine: Convoy against the PyTorch peer at its best (issue 38 point 5), one model of
# a suite at a time (each torch.compile variant of ResNet-50 costs tens of seconds), each bench
# bounded so that a long compilation cannot take the call's remaining figures with it.
#   benchmarks/gpu/peer_best.sh OUTDIR SUITE MODEL[:SECONDS[:VARIANTS]]...
# e.g. benchmarks/gpu/peer_best.sh out benchmarks/suites/resnet_gpu_training.yaml \
#        resnet18:240 'resnet50:200:default/fused,reduce-overhead/fused'
# MODEL is a model file's name in the suite (resnet18 for ../../models/resnet18.yaml); VARIANTS is
# CONVOY_PEER_VARIANTS for that model (benchmarks/peers/torch_variants.py). PEER_BEST_BENCH_ARGS
# goes to every `convoy bench` (e.g. "--devices cuda --peers pytorch,pytorch_compiled"; its
# --precision adds rows, it does not select them). Configures and builds
# through run.sh where build-gpu/ is not there yet.
set -uo pipefail
out=${1:?usage: benchmarks/gpu/peer_best.sh OUTDIR SUITE MODEL[:SECONDS[:VARIANTS]]...}
suite=${2:?usage: benchmarks/gpu/peer_best.sh OUTDIR SUITE MODEL[:SECONDS[:VARIANTS]]...}
shift 2
source "$(dirname "$0")/common.sh"
if [ ! -f "$build/build.ninja" ]; then
  CONVOY_GPU_TESTS=0 bash benchmarks/gpu/run.sh "$out/configure" > "$out/configure.txt" 2>&1 || {
    cat "$out/configure.txt"; exit 1; }
fi
dir=$(dirname "$suite")
for spec in "$@"; do
  IFS=: read -r model seconds variants <<<"$spec"
  one=$dir/.peer-best-$model.yaml  # beside the suite: its model paths are relative to it
  # The suite with only this model's line under models:
  awk -v m="/$model.yaml" '/^models:/ {inm = 1; print; next} inm && /^  - / {if (index($0, m)) print; next}
                           {inm = 0; print}' "$suite" > "$one"
  echo "== $model ($(date -u '+%F %H:%M:%S UTC'), variants: ${variants:-all}, at most ${seconds:-300} s)"
  CONVOY_PEER_VARIANTS=$variants timeout "${seconds:-300}" bash benchmarks/gpu/suite.sh "$out/$model" "$one" \
    ${PEER_BEST_BENCH_ARGS:-} > "$out/$model.txt" 2>&1
  echo "exit $?"
  cat "$out/$model.txt"
  grep -h "compiled and warmed up\|failed" "$out/$model/bench.err" 2>/dev/null | tail -12
  python3 - "$out/$model/bench/results.json" <<'PY' 2>/dev/null
import json, sys
for r in json.load(open(sys.argv[1])).get("records", []):
    if r.get("variants"):
        print(r["engine"], r["mode"], r["batch"], "variants:", r["variants"], "compile s:", r.get("compile_seconds"))
PY
  rm -f "$one"
done
