#!/usr/bin/env bash
# On the GPU machine: issue 40's checks of convoy serve's GPU metrics, through benchmarks/serve/load_test.sh.
# 1. They move under load: one run with SERVE_GPU_METRICS=1 prints nv_gpu_utilization,
#    nv_gpu_memory_used_bytes and nv_gpu_power_usage before, during and after it (gpu_metrics.py).
# 2. Sampling costs no measurable throughput: the same load with sampling on at 20 times Triton's
#    rate (--metrics-interval-ms 100) and off (--allow-gpu-metrics=false --allow-cpu-metrics=false),
#    ROUNDS servers of each alternated, three runs a server; the means, their difference and the
#    runs' own spread. Builds convoy first (configured by run.sh). About 1.5 min a server at 10 s runs.
#   benchmarks/gpu/serve_metrics.sh OUTDIR [SECONDS] [ROUNDS]      (default 10, 2)
# Env: METRICS_CASE (model:precision:images per request, default resnet50:bf16:1), METRICS_RUN (load_test.sh's
# model:connections, default m:256), SERVE_BATCH (the server's max batch, default 64); for a dry run on a CPU
# machine, METRICS_DEVICE=cpu and METRICS_DATA (the Fashion-MNIST folder) with CONVOY_GPU_BUILD_DIR=build.
set -uo pipefail
out=${1:?usage: benchmarks/gpu/serve_metrics.sh OUTDIR [SECONDS] [ROUNDS]}
seconds=${2:-10}
rounds=${3:-2}
source "$(dirname "$0")/common.sh"
export PATH=$PWD/.deps/usr/bin:$PATH
if [ ! -f "$build/build.ninja" ]; then
  CONVOY_GPU_TESTS=0 bash benchmarks/gpu/run.sh "$out/configure" > "$out/configure.txt" 2>&1 || {
    cat "$out/configure.txt"; exit 1; }
fi
cmake --build "$build" -j "$(nproc)" --target convoy > "$out/build-serve.log" 2>&1 || { tail -30 "$out/build-serve.log"; exit 1; }
IFS=: read -r model precision images <<<"${METRICS_CASE:-resnet50:bf16:1}"
run=${METRICS_RUN:-m:256}

# load NAME FLAGS WATCH RUNS: one server with FLAGS; its output in $out/metrics-NAME.txt; its img/s, one a line.
load() {
  SERVE_GPU_METRICS=$3 SERVE_FLAGS=$2 SERVE_OFFLINE=0 SERVE_DEVICE=${METRICS_DEVICE:-cuda} SERVE_MODEL=models/$model.yaml \
    SERVE_PRECISION=$precision SERVE_IMAGES=$images SERVE_BATCH=${SERVE_BATCH:-64} SERVE_DATA=${METRICS_DATA:-$data} SERVE_RUNS=$4 \
    timeout 400 bash benchmarks/serve/load_test.sh "$build" "$seconds" > "$out/metrics-$1.txt" 2>&1 ||
    { echo "serve_metrics: load_test.sh failed ($1):" >&2; tail -20 "$out/metrics-$1.txt" >&2; exit 1; }
  sed -n 's/.* connections: *\([0-9.]*\) img\/s.*/\1/p' "$out/metrics-$1.txt"
}

echo "== nv_gpu_* before, during and after $seconds s of $model $precision, $images image(s) a request, $run"
load watch "" 1 "$run" >/dev/null
grep -E ' connections: |^ *gpu ' "$out/metrics-watch.txt" | sed 's/^ *//'

echo "== sampling on (--metrics-interval-ms 100) and off, $rounds server(s) each, 3 runs a server"
on="" off=""
for r in $(seq "$rounds"); do
  on+=" $(load "on-$r" "--metrics-interval-ms 100" 0 "$run $run $run" | tr '\n' ' ')"
  off+=" $(load "off-$r" "--allow-gpu-metrics=false --allow-cpu-metrics=false" 0 "$run $run $run" | tr '\n' ' ')"
done
python3 - "$on" "$off" <<'PY'
import statistics, sys
on, off = ([float(x) for x in a.split()] for a in sys.argv[1:3])
if not on or not off:
    sys.exit("serve_metrics: no img/s figures (see the metrics-*.txt files)")
m_on, m_off = statistics.mean(on), statistics.mean(off)
spread = lambda v: (max(v) - min(v)) / statistics.mean(v) * 100
print(f"sampling on : {' '.join(f'{x:.0f}' for x in on)} img/s, mean {m_on:.0f}, spread {spread(on):.1f}%")
print(f"sampling off: {' '.join(f'{x:.0f}' for x in off)} img/s, mean {m_off:.0f}, spread {spread(off):.1f}%")
diff = (m_on - m_off) / m_off * 100
noise = max(spread(on), spread(off))
print(f"on vs off: {diff:+.2f}% ({'within' if abs(diff) <= noise else 'OUTSIDE'} the runs' own spread of {noise:.1f}%)")
PY
