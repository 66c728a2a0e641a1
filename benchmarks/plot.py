#!/usr/bin/env python3
"""Charts of a `convoy bench` results.json.

usage: plot.py bench-out/results.json [--out DIR]

Writes into DIR (default: beside the JSON):
  speedup.png     GPU over CPU, per model and batch size: Convoy's GPU images/s (fp32 and
                  bf16) over Convoy's CPU fp32 images/s, training and inference side by side.
                  Needs measured GPU and CPU cases; otherwise it says so and skips the chart.
  throughput.png  images/s of every measured case, Convoy and the peers (log scale).
Prints one line per chart written or skipped. Exit status 3 when matplotlib cannot be
imported (python3-matplotlib on Debian), 2 on a bad file or a chart it cannot write, else 0.
Each chart is written atomically (write_png_atomically).
"""
import argparse
import json
import os
import sys


def write_png_atomically(fig, path):
    """Writes the PNG as convoy writes every output (engine/core/file_io.h, OutputFile): into a
    temporary file beside the target, fsynced and renamed over it, so that a full disk leaves the
    old chart whole and no partial file; a target that is not a regular file (a directory, a
    device) is refused, and a symlink is followed to the file it names."""
    target = os.path.realpath(path)
    if os.path.lexists(target) and not os.path.isfile(target):
        raise OSError("not a regular file; a chart is written only as a new file or over a regular file")
    directory = os.path.dirname(target)
    base = f"{target}.tmp.{os.getpid()}"
    for n in range(1001):
        tmp = base if n == 0 else f"{base}.{n}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
            break
        except FileExistsError:
            continue
    else:
        raise OSError(f"cannot create a temporary file beside it ({base}.*)")
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, dpi=120, format="png")
            f.flush()
            os.fsync(f.fileno())
        if os.path.exists(target):  # the replaced chart's permissions
            os.chmod(tmp, os.stat(target).st_mode & 0o7777)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def save_chart(plt, fig, path, what):
    """Writes and closes the chart; prints the line that says so. False when it cannot be written."""
    try:
        write_png_atomically(fig, path)
    except OSError as e:
        print(f"cannot write {path}: {e}")
        return False
    finally:
        plt.close(fig)
    print(f"chart: {path} ({what})")
    return True


def main():
    ap = argparse.ArgumentParser(description="charts of a convoy bench results.json")
    ap.add_argument("results")
    ap.add_argument("--out")
    args = ap.parse_args()
    try:
        with open(args.results) as f:
            doc = json.load(f)
        records = doc["records"]
    except (OSError, ValueError, KeyError) as e:
        print(f"cannot read {args.results}: {e}")
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker  # noqa: F401 - used as matplotlib.ticker
    except ImportError as e:
        print(f"matplotlib is not importable by {sys.executable} ({e}); install python3-matplotlib "
              "or point CONVOY_PYTHON at a Python that has it")
        return 3
    out_dir = args.out or os.path.dirname(os.path.abspath(args.results))
    os.makedirs(out_dir, exist_ok=True)
    ok = [r for r in records if r.get("status") == "ok"]
    env = doc.get("environment", {})
    subtitle = f"{env.get('gpu') or 'no GPU'} vs {env.get('cpu_model') or 'CPU'} ({env.get('threads')} threads), {env.get('date', '')}"

    # GPU over CPU.
    convoy = [r for r in ok if r.get("engine") == "convoy"]
    cpu = {(r["model"], r["mode"], r["batch"]): r for r in convoy if r["device"] == "cpu" and r["precision"] == "fp32"}
    bars = {}  # (mode, precision) -> {(model, batch): speedup}
    for r in convoy:
        if not r["device"].startswith("cuda"):
            continue
        base = cpu.get((r["model"], r["mode"], r["batch"]))
        if base:
            bars.setdefault((r["mode"], r["precision"]), {})[(r["model"], r["batch"])] = (
                r["images_per_second"] / base["images_per_second"])
    if bars:
        groups = sorted({k for series in bars.values() for k in series}, key=lambda k: (k[0], k[1]))
        series = sorted(bars, key=lambda k: (k[0] != "training", k[1] != "fp32"))  # training first, fp32 first
        values = [v for s_ in bars.values() for v in s_.values()]
        width = 0.8 / len(series)
        fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(groups) + 2), 4.5))
        for i, key in enumerate(series):
            xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
            ys = [bars[key].get(g, 0) for g in groups]
            rects = ax.bar(xs, ys, width, label=f"{key[0]}, GPU {key[1]}")
            ax.bar_label(rects, labels=[f"{y:.0f}x" if y else "" for y in ys], fontsize=7)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([f"{m}\nbatch {b}" for m, b in groups])
        ax.set_ylabel("GPU images/s / CPU fp32 images/s")
        ax.set_yscale("log")
        ax.set_ylim(min(0.5, min(values) / 2), max(values) * 3)  # bars grow from below 1x
        ax.axhline(1, color="gray", linewidth=0.8)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}x"))
        ax.set_title(f"Convoy: GPU over CPU\n{subtitle}", fontsize=9)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
        fig.tight_layout()
        if not save_chart(plt, fig, os.path.join(out_dir, "speedup.png"), "GPU over CPU speedup"):
            return 2
    else:
        print("speedup chart skipped: no pair of measured GPU and CPU fp32 cases "
              "(no usable GPU here, or one device only)")

    # Throughput of everything measured.
    if ok:
        labels = [f"{r['engine']} {r['model']} {r['mode'][:5]} b{r['batch']} {r['device']} {r['precision']}" for r in ok]
        fig, ax = plt.subplots(figsize=(8, max(3, 0.28 * len(ok) + 1.2)))
        colors = {"convoy": "tab:blue", "pytorch": "tab:orange", "pytorch_compiled": "tab:red", "onnxruntime": "tab:green"}
        ax.barh(range(len(ok)), [r["images_per_second"] for r in ok],
                color=[colors.get(r["engine"], "tab:gray") for r in ok])
        ax.set_yticks(range(len(ok)))
        ax.set_yticklabels(labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("images/s")
        ax.set_title(f"Throughput\n{subtitle}", fontsize=9)
        fig.tight_layout()
        if not save_chart(plt, fig, os.path.join(out_dir, "throughput.png"), "images/s of every measured case"):
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
