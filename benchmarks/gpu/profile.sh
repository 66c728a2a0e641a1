#!/usr/bin/env bash
# On the GPU machine, after benchmarks/gpu/run.sh has built Convoy in build-gpu/: where the time
# of a training step goes (fmnet by default; CONFIG=configs/resnet50.yaml for ResNet-50 on
# synthetic data, SKIP/COUNT pick the window of kernels). Times steady-state steps (wall clock), then has Nsight Compute
# time every kernel of a window of steps, and prints GPU time per kernel name and per step next to
# the wall time per step (the difference is time the GPU waits on the host).
#   benchmarks/gpu/profile.sh OUTDIR [PRECISION]
set -uo pipefail
out=${1:?usage: benchmarks/gpu/profile.sh OUTDIR [fp32|bf16]}
precision=${2:-bf16}
source "$(dirname "$0")/common.sh"
convoy=$build/convoy
config=${CONFIG:-configs/fmnet.yaml}
if [ "$config" = configs/fmnet.yaml ]; then data_args=(--set dataset.path="$data"); else
  # Any other config trains on synthetic images of its model's input: the GPU alone.
  data_args=(--set dataset.kind=synthetic --set dataset.synthetic.size=100000 --set dataset.test_limit=256
             --set schedule.warmup_epochs=0); fi
run() {  # STEPS NAME [ncu args...]
  local steps=$1 name=$2; shift 2
  "$@" "$convoy" train --config "$config" "${data_args[@]}" --set output.dir="$out/runs" \
    --set device=cuda --set precision="$precision" --set name="$name" --set epochs=1 --max-steps "$steps"
}
# Wall time of steps 60..110: two runs, the difference cancels start-up, FindEx and the first steps.
t() { local s; s=$(date +%s.%N); run "$1" "wall$1" >"$out/wall$1.log" 2>&1; python3 -c "print($(date +%s.%N) - $s)"; }
t60=$(t 60); t110=$(t 110)
python3 -c "print(f'wall per step (steps 61-110): {($t110 - $t60) * 1000 / 50:.3f} ms')"
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "no ncu"; exit 1; }
# Kernels 1..N of the first steps include cuDNN's algorithm search: profile after many launches.
run 90 ncu "$ncu" --clock-control none --launch-skip "${SKIP:-6000}" --launch-count "${COUNT:-1500}" \
  --metrics gpu__time_duration.sum --print-units base --csv --page raw >"$out/ncu.csv" 2>"$out/ncu.err"
python3 - "$out/ncu.csv" <<'PY'
import csv, re, sys, collections
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
rows = [r for r in rows if r.get('gpu__time_duration.sum', '').replace('.', '').replace(',', '').isdigit()]
tot = collections.defaultdict(float); cnt = collections.Counter()
for r in rows:
    name = re.sub(r'\(.*', '', r['Kernel Name'])[:90]
    tot[name] += float(r['gpu__time_duration.sum'].replace(',', '')); cnt[name] += 1
# One optimizer launch per step (not 'optim': cuDNN's '..._optimized_...' kernels would match).
opt = [n for n in cnt if re.search(r'\b(sgd|adamw)_kernel\b', n)]
steps = max(1, sum(cnt[n] for n in opt))
total = sum(tot.values())
print(f'{len(rows)} kernels profiled, {steps} steps (optimizer launches): GPU time per step {total / steps / 1e6:.3f} ms, '
      f'{len(rows) / steps:.0f} kernels per step')
for n, t in sorted(tot.items(), key=lambda kv: -kv[1])[:40]:
    print(f'{t / steps / 1e3:9.1f} us/step {cnt[n] / steps:5.1f}x  {n}')
PY
tail -3 "$out/ncu.err"
