#!/usr/bin/env bash
# convoy serve under load: wrk at 1, 16 and 256 connections, each request one image in Triton's
# binary tensor format, against the offline forward pass (`convoy bench`) at the same batch. The
# batch-1 model runs first and last: before and after the other model it shares the server with
# has served.
#   bash benchmarks/serve/load_test.sh [BUILD_DIR] [SECONDS]      (default build-cpu, 10)
# Prints one line per concurrency: served img/s, p50/p99 latency, and the ratio to offline.
# Env: SERVE_DEVICE (cpu), SERVE_MODEL (models/lenet5.yaml), SERVE_BATCH (16), SERVE_SINGLE_EXTRA
# (more config.yaml lines for the batch-1 model, e.g. $'threads: 1\n'), SERVE_PRECISION (fp32; bf16, or
# int8 from a `convoy quantize` of the checkpoint: the CPU plans' precision, offline and served; on cuda int8 or fp8
# from `convoy quantize --device cuda`, the GPU's 8-bit plan),
# SERVE_INSTANCES (the batched model's instance_count, default 1), SERVE_RUNS (model:connections in turn; default single:1 m:1 m:16 m:256 single:1), SERVE_DATA (the
# Fashion-MNIST folder the checkpoint is trained on; default the Debian package's), SERVE_IMAGES (images
# per request, default 1), SERVE_PROTOCOL (http: wrk, Triton's binary tensor format; grpc: h2load from
# nghttp2-client sending ModelInfer with raw_input_contents; failures counted from the server's metrics),
# SERVE_INPUT (u8: decoded pixels, UINT8 [n, C, H, W]; jpeg: a BYTES input of n encoded 500x375 JPEGs,
# decoded and preprocessed by the server, over HTTP; shm: the pixels in system shared memory and the
# probabilities written back there, by BUILD_DIR/convoy_shm_bench over HTTP or SERVE_PROTOCOL=grpc;
# cudashm: the same in the client's GPU memory, CUDA shared memory, on CUDA builds), SERVE_FLAGS (more `convoy serve` options),
# SERVE_GPU_METRICS (1: each run's nv_gpu_* before, during and after it, by benchmarks/serve/gpu_metrics.py),
# SERVE_OFFLINE (0: no offline bench), SERVE_START_SECONDS (how long the server may take to listen, 120).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cpu}
seconds=${2:-10}
device=${SERVE_DEVICE:-cpu}
model=${SERVE_MODEL:-models/lenet5.yaml}
batch=${SERVE_BATCH:-16}
precision=${SERVE_PRECISION:-fp32}
images=${SERVE_IMAGES:-1}
protocol=${SERVE_PROTOCOL:-http}
input=${SERVE_INPUT:-u8}
data=${SERVE_DATA:-/usr/share/datasets/fashion-mnist}
convoy=$PWD/$build/convoy
work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
# A step that fails says why, with its own output, and stops the test.
step() {
  local what=$1; shift
  "$@" >"$work/step.log" 2>&1 || { echo "load_test: $what failed:" >&2; tail -n 20 "$work/step.log" >&2; exit 1; }
}
shm=""
case $input in shm) shm=system ;; cudashm) shm=cuda ;; esac
[ -n "$shm" ] || command -v wrk >/dev/null || { echo "load_test: wrk is not installed (apt-get install wrk)" >&2; exit 1; }
[ -n "$shm" ] && { [ -x "$build/convoy_shm_bench" ] || { echo "load_test: build convoy_shm_bench first" >&2; exit 1; }; }
[ "$protocol" = http ] || [ -n "$shm" ] || command -v h2load >/dev/null ||
  { echo "load_test: h2load is not installed (apt-get install nghttp2-client)" >&2; exit 1; }

# A checkpoint of the model (initialized weights: speed does not depend on their values).
step "training the checkpoint" "$convoy" train --config configs/fashion_mnist.yaml --set model=../"$model" --set name=m \
  --set output.dir="$work/runs" --set dataset.path="$data" --set dataset.train_limit=64 --set dataset.test_limit=64 --set epochs=1 \
  --set batch_size=64 --set device="$device" --set num_classes=10
mkdir -p "$work/repo/m/1" "$work/repo/single/1"
checkpoint=$work/runs/m/best.safetensors
if [ "$precision" = int8 ] || [ "$precision" = fp8 ]; then  # calibrated on 256 training images, as a user would
  quantize_flags=()
  [ "$device" = cuda ] && quantize_flags=(--device cuda --precision "$precision")  # the GPU's 8-bit plan
  step "convoy quantize" "$convoy" quantize --model "$checkpoint" --calibration fashion-mnist:train --data-path "$data" \
    --samples 256 "${quantize_flags[@]}" -o "$work/$precision.safetensors"
  checkpoint=$work/$precision.safetensors
fi
cp "$checkpoint" "$work/repo/m/1/model.safetensors"
cp "$checkpoint" "$work/repo/single/1/model.safetensors"
# Batch-1 latency without dynamic batching: no queue delay spent waiting for company.
printf 'max_batch_size: 1\ndevice: %s\nprecision: %s\n%s' "$device" "$precision" "${SERVE_SINGLE_EXTRA:-}" \
  >"$work/repo/single/config.yaml"
cat >"$work/repo/m/config.yaml" <<YAML
max_batch_size: $batch
instance_count: ${SERVE_INSTANCES:-1}
device: $device
precision: $precision
dynamic_batching: {max_queue_delay_microseconds: 1000, preferred_batch_size: [$batch], max_queue_size: 1024}
YAML

# Offline: the forward pass alone at batch 1 and at the batch the server forms (SERVE_OFFLINE=0: skipped,
# for runs compared with each other only).
offline1_ms=nan offline_ips=nan
if [ "${SERVE_OFFLINE:-1}" != 0 ]; then
sed "s|inference: \[1, 16\]|inference: [1, $batch]|; s|lenet5.yaml|$(basename "$model")|; s|precisions: \[fp32\]|precisions: [$precision]|" \
  benchmarks/suites/serve_cpu.yaml >"$work/suite.yaml"
sed -i "s|\.\./\.\./models/|$PWD/models/|" "$work/suite.yaml"
step "the offline bench" "$convoy" bench --suite "$work/suite.yaml" --devices "$device" --peers none --no-chart -o "$work/bench"
read -r offline1_ms offline_ips < <(python3 - "$work/bench/results.json" "$batch" <<'PY'
import json, sys
rows = [r for r in json.load(open(sys.argv[1]))["records"] if r.get("mode") == "inference" and r.get("engine", "convoy") == "convoy"]
one = next(r for r in rows if r["batch"] == 1)
big = next(r for r in rows if r["batch"] == int(sys.argv[2]))
print(one["p50_ms"], big["images_per_second"])
PY
)
fi

# The request: SERVE_IMAGES images (n, C, H, W) UINT8 as binary tensor data, or n JPEGs as BYTES.
python3 - "$work" "$model" "$images" "$input" <<'PY'
import io, json, math, struct, sys, re
work, model, images, kind = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
shape = [int(x) for x in re.search(r"^input:\s*\[([^\]]*)\]", open(model).read(), re.M).group(1).split(",")]
if kind == "jpeg":  # a smooth colour pattern with some detail, 500x375 as a typical ImageNet photo
    from PIL import Image
    w, h = 500, 375
    img = Image.new("RGB", (w, h))
    img.putdata([(int(128 + 120 * math.sin(x / 23 + y / 41)), int(128 + 120 * math.sin(x * y / 5000)), (x ^ y) & 255)
                 for y in range(h) for x in range(w)])
    jpeg = io.BytesIO()
    img.save(jpeg, "JPEG", quality=90)
    element = struct.pack("<I", len(jpeg.getvalue())) + jpeg.getvalue()
    data, spec = element * images, {"shape": [images], "datatype": "BYTES"}
else:
    n = images * shape[0] * shape[1] * shape[2]
    data, spec = bytes(range(256)) * (n // 256) + bytes(n % 256), {"shape": [images] + shape, "datatype": "UINT8"}
header = json.dumps({"inputs": [dict(name="input", parameters={"binary_data_size": len(data)}, **spec)],
                     "outputs": [{"name": "probabilities", "parameters": {"binary_data": True}}]}).encode()
open(work + "/body.bin", "wb").write(header + data)
open(work + "/header_length", "w").write(str(len(header)))
PY
"$convoy" serve --model-repository "$work/repo" --host 127.0.0.1 --http-port 0 --metrics-port 0 --grpc-port 0 \
  ${SERVE_FLAGS:-} 2>"$work/serve.err" &
server=$!
started=$(date +%s.%N)
# A GPU model loads its plans before the server listens (ResNet-50, 7 batch sizes: seconds).
start_limit=${SERVE_START_SECONDS:-120}
for _ in $(seq $((start_limit * 10))); do grep -q "HTTP on" "$work/serve.err" && break; sleep 0.1; done
echo "server listening after $(python3 -c "print(f'{$(date +%s.%N) - $started:.1f}')") s"
grep -iE "loaded|ready" "$work/serve.err" | head -n 5
port=$(sed -n 's/.*HTTP on 127.0.0.1:\([0-9]*\).*/\1/p' "$work/serve.err")
[ -n "$port" ] || { echo "load_test: convoy serve did not listen within $start_limit s (SERVE_START_SECONDS); its log:" >&2
                    cat "$work/serve.err" >&2; exit 1; }
metrics_port=$(sed -n 's/.*metrics on 127.0.0.1:\([0-9]*\).*/\1/p' "$work/serve.err")
grpc_port=$(sed -n 's/.*gRPC on 127.0.0.1:\([0-9]*\).*/\1/p' "$work/serve.err")
[ "$protocol" = http ] || [ -n "$grpc_port" ] || { echo "load_test: this convoy serve has no gRPC endpoint" >&2; exit 1; }
# gRPC answers HTTP 200 with the status in a trailer, which h2load does not read: the server's own
# count of failed requests says whether any failed.
failures() { curl -s "http://127.0.0.1:$metrics_port/metrics" | awk '/^nv_inference_request_failure/ {s += $2} END {print s + 0}'; }
# The server's own account of a model: requests, inferences, executions, queue and compute microseconds.
model_counters() {
  curl -s "http://127.0.0.1:$metrics_port/metrics" | awk -v m="model=\"$1\"" 'index($0, m) {
    split($1, n, "{"); v[n[1]] += $2 }
    END { printf "%d %d %d %d %d\n", v["nv_inference_request_success"], v["nv_inference_count"],
          v["nv_inference_exec_count"], v["nv_inference_queue_duration_us"], v["nv_inference_compute_infer_duration_us"] }'
}

# A run's load command, watched by gpu_metrics.py where SERVE_GPU_METRICS=1 (its report is printed after the run).
watched() {
  rm -f "$work/gpu_metrics.txt"
  if [ "${SERVE_GPU_METRICS:-0}" = 1 ]; then
    python3 benchmarks/serve/gpu_metrics.py "http://127.0.0.1:$metrics_port/metrics" --report "$work/gpu_metrics.txt" -- "$@"
  else
    "$@"
  fi
}
echo "offline ($device, $(basename "$model")): batch 1 p50 ${offline1_ms} ms; batch $batch ${offline_ips} img/s"
for run in ${SERVE_RUNS:-single:1 m:1 m:16 m:256 single:1}; do
  name=${run%:*} c=${run#*:}
  threads=$(( c < 2 ? 1 : (c < 64 ? 2 : 4) ))  # 4 for 256 connections: the client must not be the limit
  read -r r0 i0 e0 q0 x0 < <(model_counters "$name")
  if [ -n "$shm" ]; then  # N request threads, each with its own connection and regions
    line=$(watched "$PWD/$build/convoy_shm_bench" --port "$port" --grpc-port "${grpc_port:-0}" --model "$name" --images "$images" \
      --concurrency "$c" --seconds "$seconds" $([ "$protocol" = grpc ] && echo --grpc) $([ "$shm" = cuda ] && echo --cuda) \
      2>"$work/shm_bench.err" | grep '^SERVE') || { cat "$work/shm_bench.err" >&2; exit 1; }
    sed 's/^/    /' "$work/shm_bench.err"
  elif [ "$protocol" = grpc ]; then
    python3 benchmarks/serve/grpc_request.py "$name" "$images" $(python3 -c "import re,sys; print(*re.search(r'^input:\s*\[([^\]]*)\]', open(sys.argv[1]).read(), re.M).group(1).split(','))" "$model") "$work/grpc.bin"
    before=$(failures)
    rm -f "$work/h2load.log"  # h2load appends to its log: each row counts its own requests only
    watched h2load -D "$seconds" -c "$c" -t "$threads" -m 1 -H 'content-type: application/grpc' -H 'te: trailers' \
      -d "$work/grpc.bin" --log-file="$work/h2load.log" "http://127.0.0.1:$grpc_port/inference.GRPCInferenceService/ModelInfer" \
      >"$work/h2load.out" 2>&1 || { cat "$work/h2load.out" >&2; exit 1; }
    line=$(python3 - "$work/h2load.log" "$seconds" "$(( $(failures) - before ))" <<'PY'
import sys
rows = [l.split("\t") for l in open(sys.argv[1]) if l.strip()]
lat = sorted(int(r[2]) / 1000 for r in rows)
non2xx = sum(1 for r in rows if not r[1].startswith("2"))
pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")
print(f"SERVE requests={len(rows)} seconds={sys.argv[2]} non2xx={non2xx + int(sys.argv[3])} errors=0 "
      f"p50_ms={pct(0.5):.3f} p99_ms={pct(0.99):.3f}")
PY
)
  else
  line=$(SERVE_BODY="$work/body.bin" SERVE_HEADER_LENGTH=$(cat "$work/header_length") \
    watched wrk -t"$threads" -c"$c" -d"${seconds}s" --timeout 10s -s benchmarks/serve/post.lua \
    "http://127.0.0.1:$port/v2/models/$name/infer" | grep '^SERVE')
  fi
  read -r r1 i1 e1 q1 x1 < <(model_counters "$name")
  echo -n "$name: "
  python3 - "$line" "$c" "$offline_ips" "$offline1_ms" "$images" <<'PY'
import sys
f = dict(kv.split("=") for kv in sys.argv[1].split()[1:])
c, offline, one, images = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
ips = float(f["requests"]) * images / float(f["seconds"])
print(f"served, {c:3d} connections: {ips:8.0f} img/s ({ips / offline * 100:5.1f}% of offline), "
      f"p50 {float(f['p50_ms']):.3f} ms, p99 {float(f['p99_ms']):.3f} ms, non-2xx {f['non2xx']}, socket errors {f['errors']}"
      + (f"; batch-1 overhead over offline {float(f['p50_ms']) - one:.3f} ms" if c == 1 else ""))
PY
  python3 -c "import sys; r, i, e, q, x = (int(b) - int(a) for a, b in zip(sys.argv[1:6], sys.argv[6:11])); \
print(f'    server: {i / max(e, 1):.1f} images an execution, queue {q / max(r, 1) / 1000:.3f} ms and compute {x / max(r, 1) / 1000:.3f} ms a request')" \
    "$r0" "$i0" "$e0" "$q0" "$x0" "$r1" "$i1" "$e1" "$q1" "$x1"
  if [ -f "$work/gpu_metrics.txt" ]; then sed 's/^/    /' "$work/gpu_metrics.txt"; fi
done
kill -TERM $server; wait $server
server=""  # stopped: the exit trap has nothing to kill (a failed kill there would make the exit status 1)
