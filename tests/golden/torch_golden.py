#!/usr/bin/env python3
"""Golden check of one Convoy training step against PyTorch, in float64.

usage: torch_golden.py RESULTS.safetensors [--tol 1e-4]

RESULTS.safetensors is written by tests/test_golden_torch.cpp. It holds
  <layer>.<param>, <layer>.<buffer>   the model's state before the step (model.state())
  input (N, C, H, W) f32, labels (N) i32
  logits (N, classes), loss (1)        Convoy's forward in training mode
  grad.<layer>.<param>                 Convoy's parameter gradients of the loss
  after.<layer>.<buffer>               batch-norm running statistics after the forward
and metadata: model_yaml (the model's YAML text), label_smoothing.

The script builds the same network in torch.nn from the YAML, loads the state (PyTorch
semantics and names), runs forward in train mode with F.cross_entropy(label_smoothing) and
backward in float64, and compares every Convoy result with max|convoy - torch| / max|torch|
<= tol (Convoy computes in f32, so ~1e-7 is typical and 1e-4 the bound); for a gradient the
divisor is at least 1% of the largest gradient of the step, since a gradient that is zero in
exact arithmetic is f32 roundoff in Convoy. It prints one line per
tensor and exits 0 when all agree, 1 on a mismatch, 2 when it cannot run (bad file, unsupported
layer), 3 when numpy or torch cannot be imported (the C++ test then skips).

The safetensors file is read with json + struct + numpy: the `safetensors` package is not
assumed. The YAML reader and the network are benchmarks/peers/convoy_model.py's (PyYAML when
importable, else its small reader).
"""
import json
import os
import struct
import sys

# The YAML reader and the torch.nn translator are the benchmark peers' (one translator for
# both). convoy_model imports only the standard library at load time and torch when a model is
# built, so a missing torch still ends in the exit status 3 below.
sys.dont_write_bytecode = True  # no __pycache__ in the source tree, as the peers
sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "..", "..", "benchmarks", "peers")))
import convoy_model  # noqa: E402

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print(f"torch_golden.py: cannot import numpy/torch with {sys.executable}: {e}")
    sys.exit(3)


class Unusable(Exception):
    """The input cannot be checked (exit status 2)."""


# ---- safetensors ----------------------------------------------------------------------------

_DTYPES = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I32": "<i4", "I64": "<i8", "U8": "u1"}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise Unusable(f"{path}: too short for a safetensors file")
    (header_len,) = struct.unpack("<Q", data[:8])
    if 8 + header_len > len(data):
        raise Unusable(f"{path}: header length {header_len} exceeds the file")
    header = json.loads(data[8:8 + header_len].decode("utf-8"))
    body = data[8 + header_len:]
    metadata = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, info in header.items():
        dtype = info["dtype"]
        if dtype not in _DTYPES:
            raise Unusable(f"{path}: tensor {name}: unsupported dtype {dtype}")
        begin, end = info["data_offsets"]
        shape = tuple(int(d) for d in info["shape"])
        arr = np.frombuffer(body[begin:end], dtype=np.dtype(_DTYPES[dtype]))
        if arr.size != int(np.prod(shape, dtype=np.int64)):
            raise Unusable(f"{path}: tensor {name}: {arr.size} values for shape {shape}")
        tensors[name] = arr.reshape(shape).copy()
    return tensors, metadata


# ---- the network: convoy_model's, refusing what one step cannot reproduce ------------------

# Dropout draws a mask torch cannot reproduce; every other Convoy layer type is deterministic.
_CHECKED_TYPES = tuple(t for t in convoy_model.LAYER_TYPES if t != "dropout")


def build_net(doc):
    """The model YAML's network in float64 with Convoy's layer semantics and state names."""
    for spec in doc["layers"]:
        if spec["type"] not in _CHECKED_TYPES:
            raise Unusable(f"layer type '{spec['type']}' is not supported by the golden check "
                           "(dropout's mask cannot be reproduced in torch)")
    try:
        return convoy_model.build_model(doc).double()
    except ValueError as e:  # a net convoy_model cannot build, e.g. linear on (C, H, W)
        raise Unusable(str(e)) from e


# ---- the check ------------------------------------------------------------------------------

def main(argv):
    args = list(argv[1:])
    tol = 1e-4
    if "--tol" in args:
        i = args.index("--tol")
        tol = float(args[i + 1])
        del args[i:i + 2]
    if len(args) != 1:
        print(__doc__)
        return 2
    tensors, metadata = read_safetensors(args[0])
    if "model_yaml" not in metadata:
        raise Unusable(f"{args[0]}: no model_yaml in the metadata")
    doc = convoy_model.parse_yaml(metadata["model_yaml"])
    smoothing = float(metadata.get("label_smoothing", "0"))

    torch.manual_seed(0)
    net = build_net(doc)
    params = {}
    used = set()
    for key, slot, is_param in net.state_slots():
        if key not in tensors:
            raise Unusable(f"Convoy's state lacks '{key}' (torch's {tuple(slot.shape)})")
        value = tensors[key]
        if tuple(value.shape) != tuple(slot.shape):
            print(f"MISMATCH shape of {key}: Convoy {tuple(value.shape)}, torch {tuple(slot.shape)}")
            return 1
        with torch.no_grad():
            slot.copy_(torch.from_numpy(value.astype(np.float64)))
        used.add(key)
        if is_param:
            params[key] = slot
    results = {"input", "labels", "logits", "loss"}
    stray = [k for k in tensors if k not in used and k not in results
             and not k.startswith("grad.") and not k.startswith("after.")]
    if stray:
        print(f"MISMATCH: Convoy's state has tensors torch's net does not: {stray}")
        return 1

    x = torch.from_numpy(tensors["input"].astype(np.float64))
    labels = torch.from_numpy(tensors["labels"].astype(np.int64))
    net.train()
    net.zero_grad()
    logits = net(x)
    loss = F.cross_entropy(logits, labels, label_smoothing=smoothing)
    loss.backward()

    rows = [("logits", tensors.get("logits"), logits.detach()),
            ("loss", tensors.get("loss"), loss.detach().reshape(1))]
    for key, p in params.items():
        rows.append((f"grad.{key}", tensors.get(f"grad.{key}"), p.grad))
    for key, slot, is_param in net.state_slots():
        if not is_param:
            rows.append((f"after.{key}", tensors.get(f"after.{key}"), slot.detach()))

    print(f"torch {torch.__version__}, float64, train mode, label smoothing {smoothing}, "
          f"batch {tuple(x.shape)}, tolerance {tol:g} (max|diff| / max|torch|)")
    print(f"{'tensor':34} {'shape':>16} {'max|torch|':>11} {'max|diff|':>11} {'rel err':>10}")
    # A gradient that is zero in exact arithmetic (a conv bias right before batch norm, which
    # removes any per-channel constant) comes out of f32 as roundoff, ~1e-7 of the other
    # gradients: measure gradients against at least 1% of the largest gradient of the step.
    grad_scale = max((float(np.max(np.abs(r.numpy()))) for n, _, r in rows
                      if n.startswith("grad.") and r.numel()), default=0.0)
    failed = 0
    for name, convoy, reference in rows:
        ref = reference.numpy().astype(np.float64)
        if convoy is None:
            print(f"{name:34} {str(tuple(ref.shape)):>16}  MISSING in Convoy's file")
            failed += 1
            continue
        got = convoy.astype(np.float64)
        if got.shape != ref.shape:
            print(f"{name:34} shape {got.shape} vs torch {ref.shape}  MISMATCH")
            failed += 1
            continue
        scale = float(np.max(np.abs(ref))) if ref.size else 0.0
        diff = float(np.max(np.abs(got - ref))) if ref.size else 0.0
        floor = 0.01 * grad_scale if name.startswith("grad.") else 0.0
        denom = max(scale, floor)
        rel = diff / denom if denom > 0 else diff
        bad = not np.isfinite(got).all() or not (rel <= tol)
        failed += bad
        print(f"{name:34} {str(tuple(ref.shape)):>16} {scale:11.4e} {diff:11.4e} {rel:10.2e}"
              f"{' (vs 1% of the largest gradient)' if floor > scale else ''}"
              f"{'  MISMATCH' if bad else ''}")
    print(f"{len(rows) - failed} of {len(rows)} tensors agree" +
          ("" if not failed else f"; {failed} MISMATCH"))
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except Unusable as e:
        print(f"torch_golden.py: {e}")
        sys.exit(2)
