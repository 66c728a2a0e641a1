#!/usr/bin/env python3
"""Per-layer CPU inference time of Convoy against ONNX Runtime, for one model at one batch size.

Two steps, so that the raw data can be taken on one machine and read on another:

  # ONNX Runtime's own profiler (Python's onnxruntime and torch to export the model):
  layer_profile.py ort --model models/resnet50.yaml --batch 32 --threads 16 --runs 20 --out ort.json
  # Convoy: oneDNN's verbose log of `convoy bench` on the same case (ONEDNN_VERBOSE=1), then
  layer_profile.py compare --convoy convoy_verbose.log --ort ort.json

`compare` matches convolutions by their geometry (input and output channels, kernel, input and
output size) and prints, per geometry, the milliseconds per pass of each engine and the
difference, then the totals by kind of operation. Both are means over the passes logged (the
first pass of each engine left out: it includes oneDNN's and ONNX Runtime's first-touch costs).
"""
import argparse
import collections
import json
import os
import re
import sys

# "mb32_ic64oc256_ih56oh56kh1sh1dh0ph0_iw56ow56kw1sw1dw0pw0" (oneDNN's convolution problem)
CONV_DESC = re.compile(r"mb(\d+)_(?:g\d+)?ic(\d+)oc(\d+)_ih(\d+)oh(\d+)kh(\d+)")


def convoy_layers(path):
    """{key: ms per pass} and the number of passes, from oneDNN's verbose exec lines."""
    rows = []
    with open(path, errors="replace") as f:
        for line in f:
            if not re.match(r"(onednn|dnnl)_verbose,exec,cpu,", line):
                continue
            fields = line.rstrip("\n").split(",")
            kind, impl, ms = fields[3], fields[4], float(fields[-1])
            m = CONV_DESC.search(line)
            key = ("conv", int(m[2]), int(m[3]), int(m[6]), int(m[4]), int(m[5])) if m and kind == "convolution" \
                else (kind, impl)
            rows.append((key, ms))
    if not rows:
        sys.exit(f"{path}: no oneDNN verbose exec lines (run with ONEDNN_VERBOSE=1)")
    # A pass starts at the first convolution (the plans' weight reorders come before it).
    first = next(k for k, _ in rows if k[0] == "conv")
    starts = [i for i, (k, _) in enumerate(rows) if k == first]
    passes = [rows[a:b] for a, b in zip(starts, starts[1:] + [len(rows)])]
    # The bench builds a plan per input set and measures latency too: keep the passes of the
    # usual length (the most common), less the first.
    length = collections.Counter(len(p) for p in passes).most_common(1)[0][0]
    passes = [p for p in passes if len(p) == length][1:]
    total = collections.defaultdict(float)
    count = collections.Counter()
    for p in passes:
        for key, ms in p:
            total[key] += ms
    for key, _ in passes[0]:
        count[key] += 1
    return {k: v / len(passes) for k, v in total.items()}, count, len(passes)


def ort_layers(path):
    """{key: ms per pass}, counts and passes from ONNX Runtime's profile JSON."""
    with open(path) as f:
        events = json.load(f)
    runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    nodes = [e for e in events if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time")]
    if not runs or not nodes:
        sys.exit(f"{path}: no model_run or node events (an ONNX Runtime profile?)")
    runs.sort(key=lambda e: e["ts"])
    kept = runs[1:] if len(runs) > 1 else runs
    total = collections.defaultdict(float)
    count = collections.Counter()
    first_run = kept[0]
    for e in nodes:
        run = next((r for r in kept if r["ts"] <= e["ts"] <= r["ts"] + r["dur"]), None)
        if run is None:
            continue
        args = e.get("args", {})
        op = args.get("op_name", "?")
        shapes = [list(d.values())[0] for d in args.get("input_type_shape", [])]
        out = [list(d.values())[0] for d in args.get("output_type_shape", [])]
        key = (op, "")
        if "Conv" in op and len(shapes) >= 2 and len(shapes[0]) >= 4 and len(shapes[1]) == 4 and out:
            # NCHWc tensors keep NCHW shapes with the channels rounded up to the block.
            key = ("conv", shapes[1][1] * max(1, int(args.get("group", 1) or 1)), shapes[1][0], shapes[1][2],
                   shapes[0][2], out[0][2])
        total[key] += e["dur"] / 1000.0
        if run is first_run:
            count[key] += 1
    return {k: v / len(kept) for k, v in total.items()}, count, len(kept)


def compare(args):
    c_ms, c_n, c_passes = convoy_layers(args.convoy)
    o_ms, o_n, o_passes = ort_layers(args.ort)
    print(f"Convoy: {c_passes} passes, {sum(c_ms.values()):.2f} ms a pass in oneDNN primitives; "
          f"ONNX Runtime: {o_passes} runs, {sum(o_ms.values()):.2f} ms a run in its nodes")
    convs = sorted({k for k in list(c_ms) + list(o_ms) if k[0] == "conv"}, key=lambda k: (-k[4], k[3], k[1], k[2]))
    print("\nconvolutions (ic, oc, kernel, in -> out size): count, ms per pass Convoy / ONNX Runtime, "
          "Convoy - ONNX Runtime")
    diffs = 0.0
    for k in convs:
        a, b = c_ms.get(k, 0.0), o_ms.get(k, 0.0)
        diffs += a - b
        print(f"  {k[1]:>5} {k[2]:>5} {k[3]}x{k[3]} {k[4]:>3}->{k[5]:<3}  x{c_n.get(k, 0)}/{o_n.get(k, 0)}"
              f"  {a:8.3f} {b:8.3f}  {a - b:+8.3f}")
    print(f"  convolutions in all: Convoy - ONNX Runtime {diffs:+.3f} ms a pass")
    print("\nthe rest, by kind: ms per pass")
    for name, table in (("Convoy", c_ms), ("ONNX Runtime", o_ms)):
        rest = collections.defaultdict(float)
        for k, v in table.items():
            if k[0] != "conv":
                rest[" ".join(str(x) for x in k if x != "")] += v
        for kind, v in sorted(rest.items(), key=lambda kv: -kv[1]):
            print(f"  {name:<13} {kind:<40} {v:8.3f}")


def ort(args):
    import numpy as np
    import onnxruntime
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peers"))
    import convoy_model as cm
    torch.manual_seed(1)
    net = cm.build_model(cm.load_yaml(args.model)).eval()
    onnx_path = os.path.splitext(args.out)[0] + ".onnx"
    shape = (args.batch,) + tuple(net.input_shape)
    kwargs = {"dynamo": False} if "dynamo" in torch.onnx.export.__code__.co_varnames else {}
    torch.onnx.export(net, (torch.zeros(shape),), onnx_path, input_names=["x"], output_names=["logits"],
                      opset_version=17, **kwargs)
    so = onnxruntime.SessionOptions()
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.enable_profiling = True
    so.profile_file_prefix = os.path.splitext(args.out)[0]
    sess = onnxruntime.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).standard_normal(shape, dtype=np.float32)
    for _ in range(args.runs + 1):
        sess.run(None, {"x": x})
    os.replace(sess.end_profiling(), args.out)
    print(f"{args.out}: ONNX Runtime {onnxruntime.__version__}, {args.runs + 1} runs profiled")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("ort", help="profile ONNX Runtime on the model")
    o.add_argument("--model", required=True)
    o.add_argument("--batch", type=int, required=True)
    o.add_argument("--threads", type=int, required=True)
    o.add_argument("--runs", type=int, default=20)
    o.add_argument("--out", required=True)
    c = sub.add_parser("compare", help="Convoy's verbose log against ONNX Runtime's profile")
    c.add_argument("--convoy", required=True)
    c.add_argument("--ort", required=True)
    args = p.parse_args()
    ort(args) if args.cmd == "ort" else compare(args)


if __name__ == "__main__":
    main()
