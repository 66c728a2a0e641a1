"""Shared by the peer scripts: Convoy's model and run YAML, the same network as a torch
nn.Module (Convoy's layer semantics, DAG inputs included), Fashion-MNIST from IDX files,
on-device augmentation, Convoy's learning-rate schedules and Convoy's timing method.

The YAML is read with PyYAML when importable, else with a small reader of the subset the
model, run and suite files use (block mappings and lists, one-line flow collections).
"""
import gzip
import math
import os
import struct
import time

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


def _scalar(text):
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if text in ("true", "True", "yes"):
        return True
    if text in ("false", "False", "no"):
        return False
    if text in ("", "~", "null"):
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def _flow(text):
    text = text.strip()
    if text.startswith("{") and text.endswith("}"):
        out = {}
        for item in _split_top(text[1:-1], ","):
            if item.strip():
                key, *rest = _split_top(item, ":")
                out[key.strip()] = _flow(":".join(rest))
        return out
    if text.startswith("[") and text.endswith("]"):
        return [_flow(v) for v in _split_top(text[1:-1], ",") if v.strip()]
    return _scalar(text)


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


def _parse_block(lines, i, indent):
    """Parses the block at `indent` starting at lines[i]; returns (value, next index)."""
    if lines[i][1].startswith("- ") or lines[i][1] == "-":
        out = []
        while i < len(lines) and lines[i][0] == indent and (lines[i][1].startswith("- ") or lines[i][1] == "-"):
            item = lines[i][1][1:].strip()
            if not item:
                value, i = _parse_block(lines, i + 1, lines[i + 1][0])
            elif item[0] not in "[{" and len(_split_top(item, ":")) > 1:
                # "- key: value" opens a block mapping at indent + 2.
                sub = [(indent + 2, item)]
                j = i + 1
                while j < len(lines) and lines[j][0] > indent:
                    sub.append(lines[j])
                    j += 1
                value, _ = _parse_block(sub, 0, indent + 2)
                i = j
            else:
                value, i = _flow(item), i + 1
            out.append(value)
        return out, i
    out = {}
    while i < len(lines) and lines[i][0] == indent:
        key, *rest = _split_top(lines[i][1], ":")
        rest = ":".join(rest).strip()
        i += 1
        if rest:
            out[key.strip()] = _flow(rest)
        elif i < len(lines) and (lines[i][0] > indent or (lines[i][0] == indent and lines[i][1].startswith("- "))):
            out[key.strip()], i = _parse_block(lines, i, lines[i][0])
        else:
            out[key.strip()] = None
    return out, i


def parse_yaml(text):
    try:
        import yaml  # PyYAML, when installed
        return yaml.safe_load(text)
    except ImportError:
        pass
    lines = []
    for raw in text.splitlines():
        line = _strip_comment(raw).rstrip()
        if line.strip():
            lines.append((len(line) - len(line.lstrip(" ")), line.strip()))
    if not lines:
        return {}
    value, _ = _parse_block(lines, 0, lines[0][0])
    return value


def load_yaml(path):
    with open(path) as f:
        return parse_yaml(f.read())


# ---- the network ----------------------------------------------------------------------------

LAYER_TYPES = ("conv2d", "batchnorm2d", "relu", "leaky_relu", "gelu", "sigmoid", "silu", "hardsigmoid",
               "hardswish", "relu6", "maxpool2d", "avgpool2d", "global_avg_pool", "global_max_pool", "linear",
               "flatten", "dropout", "add", "concat", "mul", "softmax", "upsample")


def _pair(v):
    return (int(v[0]), int(v[1])) if isinstance(v, (list, tuple)) else (int(v), int(v))


def _make_module(nn, spec, in_shapes):
    """The torch module for one layer spec and its per-sample input shapes (None: a function)."""
    t = spec["type"]
    c = in_shapes[0][0]
    if t == "conv2d":
        return nn.Conv2d(c, int(spec["out_channels"]), _pair(spec["kernel"]),
                         stride=_pair(spec.get("stride", 1)), padding=_pair(spec.get("padding", 0)),
                         dilation=_pair(spec.get("dilation", 1)), groups=int(spec.get("groups", 1)),
                         bias=bool(spec.get("bias", True)))
    if t == "batchnorm2d":
        return nn.BatchNorm2d(c, eps=float(spec.get("eps", 1e-5)), momentum=float(spec.get("momentum", 0.1)))
    if t == "relu":
        return nn.ReLU()
    if t == "leaky_relu":
        return nn.LeakyReLU(float(spec.get("negative_slope", 0.01)))
    if t == "gelu":
        return nn.GELU()  # the exact erf form, as Convoy's
    if t == "sigmoid":
        return nn.Sigmoid()
    if t == "silu":
        return nn.SiLU()
    if t == "hardsigmoid":
        return nn.Hardsigmoid()
    if t == "hardswish":
        return nn.Hardswish()
    if t == "relu6":
        return nn.ReLU6()
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
        shape = tuple(in_shapes[0])
        if not (len(shape) == 1 or (len(shape) == 3 and shape[1:] == (1, 1))):
            raise ValueError(f"linear '{spec['name']}' needs (F) or (C, 1, 1) per sample, got {shape}")
        return nn.Sequential(nn.Flatten(1), nn.Linear(shape[0], int(spec["out_features"]),
                                                      bias=bool(spec.get("bias", True))))
    if t == "flatten":
        return nn.Flatten(1)
    if t == "dropout":
        return nn.Dropout(float(spec.get("p", 0.5)))
    if t == "softmax":
        return nn.Softmax(dim=1)
    if t == "upsample":  # align_corners=False, PyTorch's default and Convoy's
        mode = {"mode": "nearest"} if spec.get("mode", "nearest") == "nearest" else \
            {"mode": "bilinear", "align_corners": False}
        if "size" in spec:
            return nn.Upsample(size=_pair(spec["size"]), **mode)
        return nn.Upsample(scale_factor=tuple(float(v) for v in _pair(spec["scale"])), **mode)
    if t in ("add", "concat", "mul"):
        return None
    raise ValueError(f"layer type '{t}' is unknown (Convoy's types: {', '.join(LAYER_TYPES)})")


def build_model(doc):
    """nn.Module of a parsed model YAML: layers in file order, each reading `inputs` (default:
    the layer above; 'input' is the image batch), the output at `output` or the last layer."""
    import torch
    import torch.nn as nn

    class ConvoyNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.name = doc.get("name", "model")
            self.input_shape = tuple(int(d) for d in doc["input"])
            # torch module names cannot hold '.', Convoy's layer names may (layer1.0.conv1).
            self.mods = nn.ModuleDict()
            self.key_of = {}  # layer name -> its key in mods
            self.nodes = []  # (name, type, inputs)
            shapes = {"input": self.input_shape}
            prev = "input"
            for i, spec in enumerate(doc["layers"]):
                spec = dict(spec)
                spec.setdefault("name", f"{spec['type']}{i}")
                name = spec["name"]
                inputs = spec.get("inputs", [prev])
                if isinstance(inputs, str):
                    inputs = [inputs]
                for s in inputs:
                    if s not in shapes:
                        raise ValueError(f"layer '{name}': input '{s}' is not an earlier layer")
                mod = _make_module(nn, spec, [shapes[s] for s in inputs])
                if mod is not None:
                    self.key_of[name] = f"l{i}"
                    self.mods[self.key_of[name]] = mod
                self.nodes.append((name, spec["type"], list(inputs)))
                with torch.no_grad():  # per-sample output shape from an evaluation-mode pass
                    if mod is not None:
                        mod.eval()
                    xs = [torch.zeros((1,) + tuple(shapes[s])) for s in inputs]
                    shapes[name] = tuple(self._node(name, spec["type"], xs).shape[1:])
                    if mod is not None:
                        mod.train()
                prev = name
            self.shapes = shapes  # per-sample output shape of every node
            self.output = doc.get("output") or prev
            self.num_classes = int(shapes[self.output][0])

        def _node(self, name, type_, xs):
            if type_ == "add":
                return xs[0] + xs[1]
            if type_ == "concat":
                return torch.cat(xs, dim=1)
            if type_ == "mul":  # squeeze-and-excitation's x * s: s (N, C, 1, 1) or (N, C), either input
                a, b = (t[:, :, None, None] if t.dim() == 2 else t for t in xs)
                return a * b
            return self.mods[self.key_of[name]](xs[0])

        def forward(self, x):
            outs = {"input": x}
            for name, type_, inputs in self.nodes:
                outs[name] = self._node(name, type_, [outs[s] for s in inputs])
            return outs[self.output]

        def state_slots(self):
            """(name as Convoy's model.state() spells it, tensor, is a parameter) of every
            parameter and buffer: torch's `mods.fc.1.weight` is Convoy's `fc.weight`."""
            for name, key in self.key_of.items():
                mod = self.mods[key]
                leaf = mod[1] if isinstance(mod, nn.Sequential) else mod  # linear: Flatten + Linear
                for pname, p in leaf.named_parameters(recurse=False):
                    yield f"{name}.{pname}", p, True
                for bname, b in leaf.named_buffers(recurse=False):
                    if bname != "num_batches_tracked":  # torch's counter; Convoy has none
                        yield f"{name}.{bname}", b, False

    return ConvoyNet()


def param_groups(net, weight_decay):
    """Convoy's weight-decay rule: conv and linear weights decay; biases and BN do not."""
    import torch.nn as nn
    decay, no_decay = [], []
    for mod in net.modules():
        for pname, p in mod.named_parameters(recurse=False):
            if pname == "weight" and isinstance(mod, (nn.Conv2d, nn.Linear)):
                decay.append(p)
            else:
                no_decay.append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def forward_flops(net):
    """2 x multiply-adds per image of one forward pass, counted as Convoy's layers count them."""
    import torch
    import torch.nn as nn
    total = [0]
    hooks = []

    def hook(mod, inputs, output):
        out = output.numel()
        if isinstance(mod, nn.Conv2d):
            total[0] += 2 * out * (mod.in_channels // mod.groups) * mod.kernel_size[0] * mod.kernel_size[1]
        elif isinstance(mod, nn.Linear):
            total[0] += 2 * mod.in_features * mod.out_features
        elif isinstance(mod, nn.BatchNorm2d):
            total[0] += 2 * out
        elif isinstance(mod, (nn.ReLU, nn.LeakyReLU, nn.GELU, nn.Sigmoid, nn.SiLU, nn.Hardsigmoid, nn.Hardswish,
                              nn.ReLU6)):
            total[0] += out
        elif isinstance(mod, (nn.MaxPool2d, nn.AvgPool2d)):
            k = _pair(mod.kernel_size)
            total[0] += out * k[0] * k[1]
        elif isinstance(mod, (nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d)):
            total[0] += inputs[0].numel()

    for name, type_, _ in net.nodes:  # functional nodes: add and mul one FLOP per element, concat none
        if type_ in ("add", "mul"):
            total[0] += math.prod(net.shapes[name])
    for mod in net.modules():
        hooks.append(mod.register_forward_hook(hook))
    was_training = net.training
    net.eval()
    with torch.no_grad():
        net(torch.zeros((1,) + net.input_shape))
    net.train(was_training)
    for h in hooks:
        h.remove()
    return total[0]


# ---- data -----------------------------------------------------------------------------------


def read_idx(path):
    """An IDX file (optionally .gz) as (shape, bytes)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    shape = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    body = data[4 + 4 * ndim:]
    if len(body) != math.prod(shape):
        raise ValueError(f"{path}: {len(body)} bytes for shape {shape}")
    return shape, body


def load_fashion_mnist(directory, split, limit=0):
    """(images (N, 1, 28, 28) uint8, labels (N) int64) as torch tensors on the CPU."""
    import torch
    prefix = "train" if split == "train" else "t10k"
    found = {}
    for kind, suffix in (("images", "images-idx3-ubyte"), ("labels", "labels-idx1-ubyte")):
        for name in (f"{prefix}-{suffix}.gz", f"{prefix}-{suffix}"):
            if os.path.exists(os.path.join(directory, name)):
                found[kind] = os.path.join(directory, name)
                break
        else:
            raise FileNotFoundError(f"{directory}: no {prefix}-{suffix}[.gz] (Fashion-MNIST IDX files)")
    shape, pixels = read_idx(found["images"])
    _, labels = read_idx(found["labels"])
    images = torch.frombuffer(bytearray(pixels), dtype=torch.uint8).reshape(shape[0], 1, shape[1], shape[2])
    labels = torch.frombuffer(bytearray(labels), dtype=torch.uint8).to(torch.int64)
    if limit:
        images, labels = images[:limit], labels[:limit]
    return images, labels


def augment(u8, crop_padding, horizontal_flip, generator=None):
    """Convoy's augmentation on the device: a random crop of the original size from the
    zero-padded image and a horizontal flip with probability 1/2, per sample. Returns float."""
    import torch
    return augment_float(torch, u8.float(), crop_padding, horizontal_flip, generator)


def augment_float(torch, x, crop_padding, horizontal_flip, generator=None):
    """augment() on a float batch; torch comes as an argument so that torch.compile can trace it
    inside a compiled step (no import statement to trace)."""
    F = torch.nn.functional
    n, c, h, w = x.shape
    dev = x.device
    if crop_padding:
        p = crop_padding
        xp = F.pad(x, (p, p, p, p))
        dy = torch.randint(0, 2 * p + 1, (n,), device=dev, generator=generator)
        dx = torch.randint(0, 2 * p + 1, (n,), device=dev, generator=generator)
        rows = dy[:, None] + torch.arange(h, device=dev)[None, :]  # (N, H)
        cols = dx[:, None] + torch.arange(w, device=dev)[None, :]  # (N, W)
        x = xp[torch.arange(n, device=dev)[:, None, None, None], torch.arange(c, device=dev)[None, :, None, None],
               rows[:, None, :, None], cols[:, None, None, :]]
    if horizontal_flip:
        flip = torch.rand(n, device=dev, generator=generator) < 0.5
        x = torch.where(flip[:, None, None, None], x.flip(3), x)
    return x


def scheduled_lr(schedule, base_lr, step, steps_per_epoch, total_steps):
    """Convoy's scheduled_lr (engine/optim/optimizer.cpp), line for line."""
    s = schedule or {}
    kind = s.get("type", "constant")
    epoch = step / steps_per_epoch
    if kind == "onecycle":
        initial = base_lr / float(s.get("div_factor", 25.0))
        final = initial / float(s.get("final_div_factor", 1e4))
        rise_end = float(s.get("pct_start", 0.3)) * total_steps - 1
        fall_end = total_steps - 1

        def cos_anneal(a, b, pct):
            return b + (a - b) / 2.0 * (math.cos(math.pi * pct) + 1)
        if step <= rise_end:
            return cos_anneal(initial, base_lr, step / rise_end if rise_end > 0 else 1.0)
        return cos_anneal(base_lr, final, min(1.0, (step - rise_end) / max(1.0, fall_end - rise_end)))
    warmup = int(round(float(s.get("warmup_epochs", 0.0)) * steps_per_epoch))
    if step < warmup:
        start = float(s.get("warmup_start_factor", 0.1))
        return base_lr * (start + (1 - start) * step / warmup)
    if kind == "step":
        lr = base_lr
        for m in s.get("milestones", []):
            if epoch >= m:
                lr *= float(s.get("gamma", 0.1))
        return lr
    if kind == "cosine":
        span = max(1, total_steps - warmup)
        t = (step - warmup) / span
        lo = float(s.get("min_lr", 0.0))
        return lo + (base_lr - lo) * (1 + math.cos(math.pi * min(1.0, t))) / 2
    return base_lr


# ---- timing ---------------------------------------------------------------------------------


def percentile(values, q):
    """Linear interpolation between closest ranks (numpy's default), as Convoy's."""
    if not values:
        return 0.0
    v = sorted(values)
    pos = min(max(q, 0.0), 1.0) * (len(v) - 1)
    lo = int(math.floor(pos))
    hi = min(len(v) - 1, lo + 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def _spread(rounds):
    if len(rounds) < 2:
        return 0.0
    last = rounds[-3:]
    mid = percentile(last, 0.5)
    return (max(last) - min(last)) / mid if mid > 0 else 0.0


def measure(step, timing, cuda=False):
    """Convoy's measure_iterations (apps/bench/bench_runner.cpp): synchronized warm-up,
    rounds of k iterations until the last 3 agree within stable_spread (CUDA events around
    each round on the GPU, the host clock on the CPU), then synchronized single iterations
    for p50/p99. Returns a dict of seconds per iteration."""
    t = timing
    if cuda:
        import torch
        sync = torch.cuda.synchronize
    else:
        def sync():
            pass
    clock = time.perf_counter
    start = clock()
    warm = []
    while True:
        a = clock()
        step()
        sync()
        warm.append(clock() - a)
        elapsed = clock() - start
        if len(warm) >= t["warmup_iterations"] and elapsed >= t["warmup_seconds"]:
            break
        if len(warm) >= 2 and elapsed >= 0.25 * t["max_seconds"]:
            break
    recent = (warm[1:] if len(warm) > 1 else warm)[-3:]
    estimate = max(1e-9, percentile(recent, 0.5))
    k = int(min(max(round(t["round_seconds"] / estimate), 1), 1000000))

    def timed(n):
        if cuda:
            import torch
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            for _ in range(n):
                step()
            end.record()
            end.synchronize()
            return begin.elapsed_time(end) / 1e3
        a = clock()
        for _ in range(n):
            step()
        return clock() - a

    rounds, stable, spread = [], False, 0.0
    while True:
        rounds.append(timed(k) / k)
        spread = _spread(rounds)
        if len(rounds) >= t["min_rounds"] and spread <= t["stable_spread"]:
            stable = True
            break
        if len(rounds) >= t["min_rounds"] and (len(rounds) >= t["max_rounds"] or clock() - start >= t["max_seconds"]):
            break
    # Rounds of one iteration are latency samples already; the phase still runs after them (as
    # convoy bench's does), so that a slow pass's p99 is more than the slowest of a few rounds.
    latencies = list(rounds) if k == 1 else []
    lat_start = clock()
    while len(latencies) < t["latency_samples"]:
        latencies.append(timed(1))
        if clock() - lat_start >= t["latency_seconds"]:
            break
    return {"median": percentile(rounds, 0.5), "spread": spread, "stable": stable, "warmup_iterations": len(warm),
            "rounds": len(rounds), "iterations_per_round": k, "latencies": latencies,
            "p50": percentile(latencies, 0.5), "p99": percentile(latencies, 0.99), "seconds": clock() - start}


DEFAULT_TIMING = {"warmup_iterations": 3, "warmup_seconds": 0.5, "round_seconds": 0.2, "min_rounds": 3,
                  "max_rounds": 30, "stable_spread": 0.02, "max_seconds": 30, "latency_samples": 200,
                  "latency_seconds": 3}
QUICK_TIMING = {"warmup_iterations": 2, "warmup_seconds": 0.02, "round_seconds": 0.02, "min_rounds": 3,
                "max_rounds": 5, "stable_spread": 0.10, "max_seconds": 3, "latency_samples": 20,
                "latency_seconds": 0.3}
