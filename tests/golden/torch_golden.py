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
assumed. The YAML is read with PyYAML when importable, else with a small reader of the flow
style the model files use.
"""
import json
import struct
import sys

try:
    import numpy as np
    import torch
    import torch.nn as nn
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


# ---- YAML -----------------------------------------------------------------------------------

def _split_top(text, sep):
    """Splits at `sep` outside brackets and quotes."""
    parts, depth, quote, cur = [], 0, None, ""
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        cur += ch
    parts.append(cur)
    return parts


def _flow_value(text):
    text = text.strip()
    if text.startswith("{") and text.endswith("}"):
        out = {}
        for item in _split_top(text[1:-1], ","):
            if item.strip():
                key, value = _split_top(item, ":")[0], ":".join(_split_top(item, ":")[1:])
                out[key.strip()] = _flow_value(value)
        return out
    if text.startswith("[") and text.endswith("]"):
        return [_flow_value(v) for v in _split_top(text[1:-1], ",") if v.strip()]
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if text in ("true", "false"):
        return text == "true"
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def _strip_comment(line):
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def parse_model_yaml(text):
    """A model YAML: top-level `key: value` lines and a `layers:` list of flow mappings."""
    try:
        import yaml  # PyYAML, when installed
        return yaml.safe_load(text)
    except ImportError:
        pass
    doc, key = {}, None
    for raw in text.splitlines():
        line = _strip_comment(raw).rstrip()
        if not line.strip():
            continue
        if line.lstrip().startswith("- "):
            if key is None:
                raise Unusable(f"model YAML: list item outside a key: {raw!r}")
            doc.setdefault(key, []).append(_flow_value(line.lstrip()[2:]))
        elif not line[0].isspace():
            k, _, v = line.partition(":")
            key = k.strip()
            if v.strip():
                doc[key] = _flow_value(v)
        else:
            raise Unusable(f"model YAML: unsupported line (install PyYAML): {raw!r}")
    return doc


# ---- the network, with Convoy's layer semantics ---------------------------------------------

def _pair(v):
    return (int(v[0]), int(v[1])) if isinstance(v, list) else (int(v), int(v))


def make_module(spec, in_shapes):
    """The torch module for one layer spec and its per-sample input shapes."""
    t = spec["type"]
    c = in_shapes[0][0]
    if t == "conv2d":
        return nn.Conv2d(c, int(spec["out_channels"]), _pair(spec["kernel"]),
                         stride=_pair(spec.get("stride", 1)), padding=_pair(spec.get("padding", 0)),
                         dilation=_pair(spec.get("dilation", 1)), groups=int(spec.get("groups", 1)),
                         bias=bool(spec.get("bias", True)))
    if t == "batchnorm2d":
        return nn.BatchNorm2d(c, eps=float(spec.get("eps", 1e-5)),
                              momentum=float(spec.get("momentum", 0.1)))
    if t == "relu":
        return nn.ReLU()
    if t == "leaky_relu":
        return nn.LeakyReLU(float(spec.get("negative_slope", 0.01)))
    if t == "gelu":
        return nn.GELU()  # exact erf form, as Convoy's
    if t in ("maxpool2d", "avgpool2d"):
        kernel = _pair(spec["kernel"])
        stride = _pair(spec.get("stride", spec["kernel"]))
        padding = _pair(spec.get("padding", 0))
        if t == "maxpool2d":
            return nn.MaxPool2d(kernel, stride, padding)
        return nn.AvgPool2d(kernel, stride, padding, count_include_pad=False)
    if t == "global_avg_pool":
        return nn.AdaptiveAvgPool2d(1)
    if t == "global_max_pool":
        return nn.AdaptiveMaxPool2d(1)
    if t == "linear":
        features = int(np.prod(in_shapes[0]))
        if not (len(in_shapes[0]) == 1 or tuple(in_shapes[0][1:]) == (1, 1)):
            raise Unusable(f"linear '{spec['name']}' on a per-sample {tuple(in_shapes[0])}")
        return nn.Sequential(nn.Flatten(1), nn.Linear(features, int(spec["out_features"]),
                                                      bias=bool(spec.get("bias", True))))
    if t == "flatten":
        return nn.Flatten(1)
    if t == "add":
        return None
    if t == "concat":
        return None
    raise Unusable(f"layer type '{t}' is not supported by the golden check "
                   "(dropout's mask cannot be reproduced in torch)")


class Net(nn.Module):
    def __init__(self, doc):
        super().__init__()
        self.mods = nn.ModuleDict()
        self.nodes = []  # (name, type, inputs)
        shapes = {"input": tuple(int(d) for d in doc["input"])}
        prev = "input"
        for i, spec in enumerate(doc["layers"]):
            spec = dict(spec)
            spec.setdefault("name", f"{spec['type']}{i}")
            name = spec["name"]
            inputs = spec.get("inputs", [prev])
            if isinstance(inputs, str):
                inputs = [inputs]
            mod = make_module(spec, [shapes[s] for s in inputs])
            if mod is not None:
                self.mods[name] = mod
            self.nodes.append((name, spec["type"], inputs))
            # Per-sample output shape from a dummy evaluation-mode pass (touches no statistics).
            with torch.no_grad():
                if mod is not None:
                    mod.eval()
                xs = [torch.zeros((1,) + shapes[s], dtype=torch.float64) for s in inputs]
                if mod is not None:
                    mod.double()
                shapes[name] = tuple(self._apply_node(name, spec["type"], xs).shape[1:])
            prev = name
        self.output = doc.get("output") or prev

    def _apply_node(self, name, type_, xs):
        if type_ == "add":
            return xs[0] + xs[1]
        if type_ == "concat":
            return torch.cat(xs, dim=1)
        return self.mods[name](xs[0])

    def forward(self, x):
        outs = {"input": x}
        for name, type_, inputs in self.nodes:
            outs[name] = self._apply_node(name, type_, [outs[s] for s in inputs])
        return outs[self.output]

    def state_slots(self):
        """(state-dict name as Convoy spells it, tensor) for every parameter and buffer."""
        for name, mod in self.mods.items():
            leaf = mod[1] if isinstance(mod, nn.Sequential) else mod  # linear: Flatten + Linear
            for pname, p in leaf.named_parameters(recurse=False):
                yield f"{name}.{pname}", p, True
            for bname, b in leaf.named_buffers(recurse=False):
                if bname != "num_batches_tracked":
                    yield f"{name}.{bname}", b, False


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
    doc = parse_model_yaml(metadata["model_yaml"])
    smoothing = float(metadata.get("label_smoothing", "0"))

    torch.manual_seed(0)
    net = Net(doc).double()
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
