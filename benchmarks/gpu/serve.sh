#!/usr/bin/env bash
# On the GPU machine: `convoy serve` on the GPU under load (benchmarks/serve/load_test.sh: wrk over
# 127.0.0.1, Triton's binary tensor format), each figure beside the offline `convoy bench` of the
# same model, precision and batch from the same run. Builds convoy first (configured by run.sh).
#   benchmarks/gpu/serve.sh OUTDIR [SECONDS]
# Env: SERVE_CASES (default "resnet50:bf16:1 resnet50:bf16:32 resnet50:bf16:1:jpeg resnet50:fp32:1";
# model:precision:images per request[:u8|jpeg[:http|grpc]]), SERVE_BATCH (the server's max batch, default 64).
# Needs wrk in .deps (../shared/gpu/fetch-debs.sh .deps ... wrk libluajit-5.1-2 libboost1.74-dev).
set -uo pipefail
out=${1:?usage: benchmarks/gpu/serve.sh OUTDIR [SECONDS]}
seconds=${2:-10}
source "$(dirname "$0")/common.sh"
export PATH=$PWD/.deps/usr/bin:$PATH
if [ ! -f "$build/build.ninja" ]; then
  CONVOY_GPU_TESTS=0 bash benchmarks/gpu/run.sh "$out/configure" > "$out/configure.txt" 2>&1 || {
    cat "$out/configure.txt"; exit 1; }
fi
cmake --build "$build" -j "$(nproc)" --target convoy > "$out/build-serve.log" 2>&1 || {
  tail -30 "$out/build-serve.log"; exit 1; }
for case in ${SERVE_CASES:-resnet50:bf16:1 resnet50:bf16:32 resnet50:bf16:1:jpeg resnet50:fp32:1}; do
  IFS=: read -r model precision images input protocol <<<"$case"
  input=${input:-u8} protocol=${protocol:-http}
  runs="single:1 m:1 m:16 m:256"
  [ "$images" -gt 1 ] && runs="m:1 m:4 m:16"
  echo "== $model $precision, $images $input image(s) a request over $protocol, max batch ${SERVE_BATCH:-64}"
  SERVE_INPUT=$input SERVE_PROTOCOL=$protocol SERVE_DEVICE=cuda SERVE_MODEL=models/$model.yaml SERVE_PRECISION=$precision SERVE_IMAGES=$images \
    SERVE_BATCH=${SERVE_BATCH:-64} SERVE_DATA=$data SERVE_RUNS=$runs \
    timeout 300 bash benchmarks/serve/load_test.sh "$build" "$seconds" 2>&1 | tee "$out/serve-$model-$precision-$images-$input-$protocol.txt"
done
