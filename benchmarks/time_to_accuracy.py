#!/usr/bin/env python3
"""Time to accuracy: `convoy train` and the same recipe in PyTorch, wall time to a target
test accuracy on Fashion-MNIST (fmnet, 8 epochs, batch 512: 93%).

usage: time_to_accuracy.py [--config configs/fmnet.yaml] [--data DIR] [--target 0.93]
                           [--device auto|cuda|cpu] [--convoy BIN] [--out DIR] [--quick]
                           [--skip-convoy] [--skip-pytorch] [--channels-last] [--compile] [--compile-mode M]

Runs `convoy train --config CONFIG` (runs/<name>/metrics.csv: per-epoch training seconds,
evaluation excluded, and test accuracy) and peers/pytorch_train.py on the same config (same
model YAML, optimizer, schedule, label smoothing, augmentation, batch, epochs, precision),
then reports for each: the training seconds until the first epoch whose test accuracy
reaches the target (epoch granularity: accuracy is measured once per epoch), the total
training seconds and the final accuracy. Writes DIR/time_to_accuracy.json, .md and
accuracy_vs_time.png (matplotlib), and prints the markdown table.

--quick: a plumbing check for machines without a GPU: 2,048 training and 1,000 test images,
one epoch (the target is not expected to be reached).

Environment: CONVOY_BINARY (the convoy binary), CONVOY_PYTHON (the Python with torch for the
peer; default: this interpreter). Data: --data, else the config's dataset.path, else
/usr/share/datasets/fashion-mnist, else .deps/usr/share/datasets/fashion-mnist.
"""
import argparse
import csv
import datetime
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def find_convoy(explicit):
    candidates = [explicit, os.environ.get("CONVOY_BINARY")]
    candidates += [os.path.join(REPO, d, "convoy") for d in ("build", "build-bench", "build-cuda", "build-cpu")]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return shutil.which("convoy")


def find_data(explicit):
    for c in (explicit, "/usr/share/datasets/fashion-mnist", os.path.join(REPO, ".deps/usr/share/datasets/fashion-mnist")):
        if c and os.path.isdir(c):
            return os.path.abspath(c)
    return None


def read_metrics(path):
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            rows.append({"epoch": int(r["epoch"]), "epoch_seconds": float(r["epoch_seconds"]),
                         "test_accuracy": float(r["test_accuracy"]), "images_per_second": float(r["images_per_second"])})
    elapsed = 0.0
    for r in rows:
        elapsed += r["epoch_seconds"]
        r["elapsed_seconds"] = elapsed
    return rows


def summarize(engine, rows, target, wall, extra):
    hit = next((r for r in rows if r["test_accuracy"] >= target), None)
    return {"engine": engine, "status": "ok" if rows else "failed",
            "seconds_to_target": hit["elapsed_seconds"] if hit else None,
            "epoch_at_target": hit["epoch"] if hit else None,
            "train_seconds": rows[-1]["elapsed_seconds"] if rows else None,
            "final_test_accuracy": rows[-1]["test_accuracy"] if rows else None,
            "best_test_accuracy": max((r["test_accuracy"] for r in rows), default=None),
            "epochs": len(rows), "process_wall_seconds": wall, "curve": rows, **extra}


def main():
    ap = argparse.ArgumentParser(description="time to accuracy: Convoy vs PyTorch")
    ap.add_argument("--config", default=os.path.join(REPO, "configs", "fmnet.yaml"))
    ap.add_argument("--data")
    ap.add_argument("--target", type=float, default=0.93)
    ap.add_argument("--device", default="auto", help="auto, cuda or cpu (both engines)")
    ap.add_argument("--convoy", help="the convoy binary (default: $CONVOY_BINARY, build*/convoy, PATH)")
    ap.add_argument("--out", default="tta-out")
    ap.add_argument("--quick", action="store_true", help="2,048 training images, 1 epoch: plumbing only")
    ap.add_argument("--skip-convoy", action="store_true")
    ap.add_argument("--skip-pytorch", action="store_true")
    ap.add_argument("--channels-last", action="store_true", help="PyTorch: channels_last on the GPU")
    ap.add_argument("--compile", action="store_true", help="PyTorch: torch.compile")
    ap.add_argument("--compile-mode", help="PyTorch: torch.compile's mode (implies --compile), e.g. reduce-overhead")
    args = ap.parse_args()

    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    config = os.path.abspath(args.config)
    data = find_data(args.data)
    quick_sets = ["dataset.train_limit=2048", "dataset.test_limit=1000", "epochs=1"] if args.quick else []
    results = []
    notes = []

    if not args.skip_convoy:
        convoy = find_convoy(args.convoy)
        if not convoy:
            results.append({"engine": "convoy", "status": "missing", "reason": "no convoy binary (set CONVOY_BINARY)"})
        else:
            runs = os.path.join(out, "convoy_runs")
            cmd = [convoy, "train", "--config", config, "--set", "name=tta_convoy", "--set", f"output.dir={runs}",
                   "--set", f"device={args.device}"]
            if data:
                cmd += ["--set", f"dataset.path={data}"]
            for s in quick_sets:
                cmd += ["--set", s]
            log("$ " + " ".join(cmd))
            metrics = os.path.join(runs, "tta_convoy", "metrics.csv")
            if os.path.exists(metrics):
                os.remove(metrics)
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, stdout=sys.stderr)
            wall = time.perf_counter() - t0
            if proc.returncode != 0 or not os.path.exists(metrics):
                results.append({"engine": "convoy", "status": "failed",
                                "reason": f"convoy train exited with status {proc.returncode}", "command": cmd})
            else:
                results.append(summarize("convoy", read_metrics(metrics), args.target, wall,
                                         {"command": cmd, "metrics": metrics}))

    if not args.skip_pytorch:
        python = os.environ.get("CONVOY_PYTHON") or sys.executable
        metrics = os.path.join(out, "pytorch_metrics.csv")
        cmd = [python, os.path.join(HERE, "peers", "pytorch_train.py"), "--config", config, "--device", args.device,
               "--out", metrics]
        if data:
            cmd += ["--data", data]
        if args.quick:
            cmd += ["--train-limit", "2048", "--test-limit", "1000", "--epochs", "1"]
        if args.channels_last:
            cmd.append("--channels-last")
        if args.compile:
            cmd.append("--compile")
        if args.compile_mode:
            cmd += ["--compile-mode", args.compile_mode]
        log("$ " + " ".join(cmd))
        if os.path.exists(metrics):
            os.remove(metrics)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        wall = time.perf_counter() - t0
        summary = {}
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                try:
                    summary = json.loads(line)
                except ValueError:
                    pass
        if proc.returncode != 0 or not os.path.exists(metrics):
            results.append({"engine": "pytorch", "status": "missing" if proc.returncode in (1, 2) and not summary else "failed",
                            "reason": f"{python} pytorch_train.py exited with status {proc.returncode}", "command": cmd})
        else:
            extra = {k: summary[k] for k in ("torch_version", "device", "precision") if k in summary}
            results.append(summarize("pytorch", read_metrics(metrics), args.target, wall,
                                     {"command": cmd, "metrics": metrics, **extra}))

    # Ratio, when both reached the target.
    by = {r["engine"]: r for r in results}
    c, p = by.get("convoy", {}), by.get("pytorch", {})
    if c.get("seconds_to_target") and p.get("seconds_to_target"):
        notes.append(f"PyTorch / Convoy time to {100 * args.target:.0f}%: "
                     f"{p['seconds_to_target'] / c['seconds_to_target']:.2f}x")
    if c.get("train_seconds") and p.get("train_seconds"):
        notes.append(f"PyTorch / Convoy total training time: {p['train_seconds'] / c['train_seconds']:.2f}x")

    lines = [f"## Time to {100 * args.target:.0f}% test accuracy ({os.path.relpath(config, REPO)}"
             f"{', --quick: 2,048 images, 1 epoch' if args.quick else ''})", "",
             "| engine | status | seconds to target | epoch | training seconds | final accuracy | best accuracy |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in results:
        if r["status"] != "ok":
            lines.append(f"| {r['engine']} | {r['status']}: {r.get('reason', '')} | | | | | |")
            continue
        lines.append(f"| {r['engine']} | ok | "
                     f"{'%.2f' % r['seconds_to_target'] if r['seconds_to_target'] else 'not reached'} | "
                     f"{r['epoch_at_target'] or ''} | {r['train_seconds']:.2f} | {100 * r['final_test_accuracy']:.2f}% | "
                     f"{100 * r['best_test_accuracy']:.2f}% |")
    lines += [""] + [f"- {n}" for n in notes]
    lines.append("- seconds: training wall time summed over epochs (synchronized at each epoch's end); "
                 "per-epoch evaluation excluded, as in Convoy's metrics.csv")

    # Accuracy against time.
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        lowest = 100 * args.target
        for r in results:
            if r["status"] == "ok":
                ys = [100 * x["test_accuracy"] for x in r["curve"]]
                lowest = min([lowest] + ys)
                ax.plot([x["elapsed_seconds"] for x in r["curve"]], ys, marker="o", label=r["engine"])
        ax.axhline(100 * args.target, color="gray", linestyle="--", linewidth=1, label=f"{100 * args.target:.0f}%")
        ax.set_xlabel("training seconds (evaluation excluded)")
        ax.set_ylabel("test accuracy (%)")
        ax.set_ylim(max(0, min(100 * args.target - 30, lowest - 5)), 100)
        ax.set_xlim(left=0)
        ax.set_title("Fashion-MNIST, " + os.path.basename(config), fontsize=9)
        ax.legend()
        fig.tight_layout()
        png = os.path.join(out, "accuracy_vs_time.png")
        fig.savefig(png, dpi=120)
        plt.close(fig)
        lines.append(f"- chart: {png}")
    except ImportError as e:
        lines.append(f"- chart skipped: matplotlib is not importable by {sys.executable} ({e})")

    doc = {"schema": "convoy-tta-1", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "config": config, "data": data, "target": args.target, "quick": args.quick, "device": args.device,
           "results": results}
    with open(os.path.join(out, "time_to_accuracy.json"), "w") as f:
        json.dump(doc, f, indent=2)
    md = "\n".join(lines) + "\n"
    with open(os.path.join(out, "time_to_accuracy.md"), "w") as f:
        f.write(md)
    print(md)
    return 0 if all(r["status"] == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
