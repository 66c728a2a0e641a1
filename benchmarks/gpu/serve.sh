#!/usr/bin/env bash
# On the GPU machine: `convoy serve` on the GPU under load (benchmarks/serve/load_test.sh: wrk over
# 127.0.0.1, Triton's binary tensor format), each figure beside the offline `convoy bench` of the
# same model, precision and batch from the same run. Builds convoy first (configured by run.sh).
#   benchmarks/gpu/serve.sh OUTDIR [SECONDS]
# Env: SERVE_CASES (default "resnet50:bf16:1 resnet50:bf16:32 resnet50:bf16:1:jpeg resnet50:fp32:1";
# model:precision:images per request[:u8|jpeg|shm|cudashm[:http|grpc]]; shm and cudashm: inputs in system or CUDA
# shared memory, through build-gpu/convoy_shm_bench, e.g. "resnet50:bf16:64:cudashm resnet50:bf16:64:shm:grpc"), SERVE_BATCH (the server's max batch, default 64),
# SERVE_INFER_IMAGES (JPEGs for the `convoy infer` run, default 20000; 0: none), SERVE_INFER_RUNS (its
# batch:workers pairs, default 256:16), SERVE_INSTANCES (the batched model's instance_count, default 1),
# SERVE_RUNS (load_test.sh's model:connections runs, instead of the case's default), SERVE_FLAGS (serve options),
# SERVE_GPU_METRICS (1: nv_gpu_* before, during and after each run; benchmarks/gpu/serve_metrics.sh also
# measures what sampling them costs).
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
cmake --build "$build" -j "$(nproc)" --target convoy convoy_shm_bench > "$out/build-serve.log" 2>&1 || {
  tail -30 "$out/build-serve.log"; exit 1; }
for case in ${SERVE_CASES:-resnet50:bf16:1 resnet50:bf16:32 resnet50:bf16:1:jpeg resnet50:fp32:1}; do
  IFS=: read -r model precision images input protocol <<<"$case"
  input=${input:-u8} protocol=${protocol:-http}
  runs="single:1 m:1 m:16 m:256"
  [ "$images" -gt 1 ] && runs="m:1 m:4 m:16 m:32"
  runs=${SERVE_RUNS:-$runs}
  echo "== $model $precision, $images $input image(s) a request over $protocol, max batch ${SERVE_BATCH:-64}"
  SERVE_INSTANCES=${SERVE_INSTANCES:-1} SERVE_INPUT=$input SERVE_PROTOCOL=$protocol SERVE_DEVICE=cuda SERVE_MODEL=models/$model.yaml SERVE_PRECISION=$precision SERVE_IMAGES=$images \
    SERVE_BATCH=${SERVE_BATCH:-64} SERVE_DATA=$data SERVE_RUNS=$runs \
    timeout 300 bash benchmarks/serve/load_test.sh "$build" "$seconds" 2>&1 | tee "$out/serve-$model-$precision-$images-$input-$protocol.txt"
done

# `convoy infer` on the GPU over a folder of JPEGs (decode with nvJPEG + infer, top-1 printed): the
# images per second of the whole command, and of its steady part ((N - 1) images over the time N
# images take beyond one image's run, which holds the start-up: loading, recording every batch size).
if [ "${SERVE_INFER_IMAGES:-20000}" -gt 0 ]; then
  n=${SERVE_INFER_IMAGES:-20000}
  work=$(mktemp -d)
  "$build/convoy" train --config configs/fashion_mnist.yaml --set model=../models/resnet50.yaml --set name=r50 \
    --set output.dir="$work/runs" --set dataset.path="$data" --set dataset.train_limit=64 --set dataset.test_limit=64 \
    --set epochs=1 --set batch_size=64 --set num_classes=10 --set precision=bf16 > "$out/infer-train.log" 2>&1 ||
    { tail -5 "$out/infer-train.log"; exit 1; }
  python3 - "$work/jpegs" "$n" <<'PY'
import math, os, sys
from PIL import Image
folder, n = sys.argv[1], int(sys.argv[2])
os.makedirs(folder + "/x")
names = []
for k in range(16):  # 16 distinct 500x375 JPEGs, linked under n names (decoding is the same work)
    img = Image.new("RGB", (500, 375))
    img.putdata([(int(128 + 120 * math.sin(x / (11 + k) + y / 41)), int(128 + 120 * math.sin(x * y / (4000 + k))),
                  (x ^ y ^ k) & 255) for y in range(375) for x in range(500)])
    names.append(f"{folder}/src{k}.jpg")
    img.save(names[-1], "JPEG", quality=90)
for i in range(n):
    os.link(names[i % 16], f"{folder}/x/{i:06d}.jpg")
PY
  timed() { local t0 t1; t0=$(date +%s.%N); "$@" > "$work/preds.txt" 2> "$work/infer.err" || { cat "$work/infer.err"; return 1; }
            t1=$(date +%s.%N); python3 -c "print(round($t1 - $t0, 3))"; }
  # SERVE_INFER_RUNS: batch:workers pairs, each timed on one image and on all of them.
  for variant in ${SERVE_INFER_RUNS:-256:16}; do
    IFS=: read -r batch workers <<<"$variant"
    one=$(timed "$build/convoy" infer --model "$work/runs/r50/best.safetensors" --device cuda --batch-size "$batch" \
          --workers "$workers" "$work/jpegs/x/000000.jpg")
    all=$(timed "$build/convoy" infer --model "$work/runs/r50/best.safetensors" --device cuda --batch-size "$batch" \
          --workers "$workers" "$work/jpegs/x")
    echo "== convoy infer, $n JPEGs (500x375), ResNet-50 $(grep -o 'in [a-z0-9]*$' "$work/infer.err" | head -1), batch $batch," \
         "$workers workers: $(wc -l < "$work/preds.txt") lines, $all s in all ($(python3 -c "print(round($n / $all))") img/s)," \
         "one image $one s, steady $(python3 -c "print(round(($n - 1) / ($all - $one)))") img/s"
  done
  head -c 300 "$work/infer.err"
  rm -rf "$work"
fi
