#!/usr/bin/env bash
# CPU inference in a container's CPU quota beside a busy neighbour (issue 39 point 7), as one
# command: a cgroup with CPUS CPUs of quota (cgroup v2 `cpu.max`, or v1 `cpu.cfs_quota_us`), one
# busy process per two CPUs *outside* it on the same cores, and `convoy bench` (Convoy's cases and
# the peers') inside it, RUNS times; then each row's p99/p50 and Convoy over ONNX Runtime, run by
# run, against the bar (p99 <= 3x p50, >= 0.9x ONNX Runtime). Needs root (it makes the cgroup).
#   bash benchmarks/cpu/quota.sh OUTDIR [CPUS] [RUNS]        (defaults: 1.5, 3)
# Env: QUOTA_SUITE (default benchmarks/suites/cpu_shared.yaml), QUOTA_MODELS (only these of its
# models, e.g. "lenet5 fmnet"), CONVOY (default build/convoy).
set -euo pipefail
out=${1:?usage: benchmarks/cpu/quota.sh OUTDIR [CPUS] [RUNS]}
cpus=${2:-1.5}
runs=${3:-3}
cd "$(dirname "$0")/../.."
convoy=$PWD/${CONVOY:-build/convoy}
suite=${QUOTA_SUITE:-benchmarks/suites/cpu_shared.yaml}
[ "$(id -u)" = 0 ] || { echo "quota.sh: making a cgroup needs root" >&2; exit 1; }
[ -x "$convoy" ] || { echo "quota.sh: no $convoy (build it first)" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The suite, with its model paths made absolute and only QUOTA_MODELS kept.
suite_dir=$(cd "$(dirname "$suite")" && pwd)
sed "s|model: \.\./\.\./models/|model: $PWD/models/|; s|model: \([^/][^,]*\.yaml\)|model: $suite_dir/\1|" "$suite" > "$out/suite.yaml"
if [ -n "${QUOTA_MODELS:-}" ]; then  # a model line stays when its file's name is one of them
  awk -v keep=" $QUOTA_MODELS " '/model: .*\.yaml/ { n = $0; sub(/\.yaml.*/, "", n); sub(/.*\//, "", n)
                                                     if (index(keep, " " n " ") == 0) next } { print }' \
    "$out/suite.yaml" > "$out/suite.kept" && mv "$out/suite.kept" "$out/suite.yaml"
fi

# The cgroup: v2 where the unified hierarchy is mounted, else v1's cpu controller.
period=100000
quota=$(python3 -c "print(int($cpus * $period))")
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  cg=/sys/fs/cgroup/convoy-quota
  grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control || echo +cpu > /sys/fs/cgroup/cgroup.subtree_control
  mkdir -p "$cg"
  echo "$quota $period" > "$cg/cpu.max"
else
  cg=/sys/fs/cgroup/cpu/convoy-quota
  mkdir -p "$cg"
  echo "$period" > "$cg/cpu.cfs_period_us"
  echo "$quota" > "$cg/cpu.cfs_quota_us"
fi
busy=()
cleanup() { for p in "${busy[@]}"; do kill "$p" 2>/dev/null || true; done; rmdir "$cg" 2>/dev/null || true; }
trap cleanup EXIT
n=$(( $(nproc) / 2 )); [ "$n" -ge 1 ] || n=1
for _ in $(seq "$n"); do sh -c 'while :; do :; done' & busy+=($!); done
echo "quota.sh: $cpus CPUs of quota ($cg), $n busy process(es) outside it, $runs run(s) of $suite"

for r in $(seq "$runs"); do
  sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' _ "$cg" \
    "$convoy" bench --suite "$out/suite.yaml" --out "$out/run$r" --no-chart > "$out/run$r.log" 2>&1 ||
    { echo "quota.sh: run $r failed:"; tail -20 "$out/run$r.log"; exit 1; }
  echo "run $r done at $(date -u +%T)"
done
python3 - "$out" "$runs" <<'PY'
import json, sys
out, runs = sys.argv[1], int(sys.argv[2])
rows, misses = {}, 0
for r in range(1, runs + 1):
    recs = {(x["engine"], x["model"], x["batch"]): x for x in json.load(open(f"{out}/run{r}/results.json"))["records"]
            if x.get("status") == "ok"}
    for (engine, model, batch), x in recs.items():
        if engine != "convoy":
            continue
        peer = recs.get(("onnxruntime", model, batch))
        tail = x["p99_ms"] / x["p50_ms"]
        ratio = x["images_per_second"] / peer["images_per_second"] if peer else float("nan")
        slow = x.get("slow_samples", {}).get("split", {})
        why = (f" [slow: {slow['on_cpu_ms']:.0f} ms on a CPU, {slow['waiting_for_cpu_ms']:.0f} waiting, "
               f"{slow['blocked_ms']:.0f} blocked]") if tail > 3 and slow else ""
        bad = tail > 3 or ratio < 0.9
        misses += bad
        rows.setdefault((model, batch), []).append(f"{tail:.2f}x/{ratio:.2f}x{' MISS' if bad else ''}{why}")
print("model batch: Convoy p99/p50 / Convoy over ONNX Runtime, run by run")
for (model, batch), cells in rows.items():
    print(f"{model} {batch}: " + "  ".join(cells))
print(f"{sum(len(c) for c in rows.values()) - misses} of {sum(len(c) for c in rows.values())} rows meet both bars")
PY
