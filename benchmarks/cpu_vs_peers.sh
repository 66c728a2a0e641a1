#!/usr/bin/env bash
# Convoy against ONNX Runtime and PyTorch on the CPU, benchmarks/suites/cpu.yaml one model at a
# time, so that both engines of a case run within a minute of each other on a shared machine,
# repeated ROUNDS times; prints each round's Convoy/ONNX Runtime ratio and their median.
# usage: bash benchmarks/cpu_vs_peers.sh OUT [ROUNDS] [convoy bench options, e.g. --threads 2]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:?usage: cpu_vs_peers.sh OUT [ROUNDS] [convoy bench options]}"
rounds="${2:-2}"
shift $(( $# >= 2 ? 2 : 1 ))
convoy="${CONVOY:-$root/build-cpu/convoy}"
bash "$root/scripts/install-onnxruntime-node.sh"
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for model in lenet5 fmnet resnet18 resnet50; do
    suite="$out/cpu-$model.yaml"
    # The suite with only this model's line (paths made absolute).
    grep -v -E "model: \.\./\.\./models/(lenet5|fmnet|resnet18|resnet50)\.yaml" "$root/benchmarks/suites/cpu.yaml" \
      | sed "s|^models:|models:\n  - {model: $root/models/$model.yaml, inference: [1, 32], training: []}|" > "$suite"
    CONVOY_BENCH_DIR="$root/benchmarks" "$convoy" bench --suite "$suite" --out "$out/round$r-$model" --no-chart "$@" \
      > "$out/round$r-$model.md" 2> "$out/round$r-$model.log" || true
  done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys, glob, os
out, rounds = sys.argv[1], int(sys.argv[2])
cases = {}
for path in sorted(glob.glob(os.path.join(out, "round*-*/results.json"))):
    r = int(os.path.basename(os.path.dirname(path)).split("-")[0][5:])
    for rec in json.load(open(path))["records"]:
        if rec.get("status") != "ok":
            continue
        key = (rec["model"], rec["batch"])
        cases.setdefault(key, {}).setdefault(r, {})[rec["engine"]] = rec["images_per_second"]
print("| model | batch | " + " | ".join(f"round {r}: Convoy / ORT / PyTorch img/s (Convoy/ORT)" for r in range(1, rounds + 1))
      + " | median Convoy/ORT |")
print("|---|---:|" + "---|" * rounds + "---:|")
order = ["lenet5", "fmnet", "resnet18", "resnet50"]
for (model, batch) in sorted(cases, key=lambda k: (order.index(k[0]) if k[0] in order else 9, k[1])):
    cells, ratios = [], []
    for r in range(1, rounds + 1):
        e = cases[(model, batch)].get(r, {})
        c, o, p = e.get("convoy"), e.get("onnxruntime"), e.get("pytorch")
        fmt = lambda v: f"{v:,.4g}" if v else "-"
        ratio = c / o if c and o else None
        if ratio:
            ratios.append(ratio)
        cells.append(f"{fmt(c)} / {fmt(o)} / {fmt(p)} ({ratio:.2f}x)" if ratio else f"{fmt(c)} / {fmt(o)} / {fmt(p)}")
    med = f"**{statistics.median(ratios):.2f}x**" if ratios else "-"
    print(f"| {model} | {batch} | " + " | ".join(cells) + f" | {med} |")
PY
