"""The pytorch_compiled peer at its best: the setups it tries, how each one's step is built, and
which one it reports.

A careful PyTorch user tunes more than `torch.compile(model)`: the compile mode (reduce-overhead's
CUDA graphs pay off for small steps, not always for large ones), the optimizer (one fused kernel
per parameter group, or a foreach step compiled by torch.compile as PyTorch's "compiling the
optimizer" recipe does), augmentation and normalization compiled into the step rather than run
eagerly, and for inference a model converted to bf16 rather than autocast around fp32 weights.
Which is fastest depends on the model, the batch and the torch version, so the peer times each
variant on a fresh model (compiled and warmed up before its timing starts) and reports the
fastest, with every variant's figure in the record (`variants`).

Variant names are "<compile mode>/<what else>":
  training:  <mode>/fused             SGD(fused=True), its step eager (<mode>/eager where torch or
                                      the device has no fused SGD)
             <mode>/foreach-compiled  SGD(foreach=True), its step compiled (default mode)
  inference: <mode>/autocast          fp32 weights, torch.autocast to bf16 (bf16 rows)
             <mode>/bf16-weights      the model and its input converted to bf16 (bf16 rows)
             <mode>/fp32, <mode>/tf32 (the other precisions: one variant per mode)
CONVOY_PEER_VARIANTS (comma-separated shell patterns, e.g. "reduce-overhead/*,*/fused") keeps
only the variants it matches: each compilation of ResNet-50 costs tens of seconds.

plan_variants, select_variants and best_variant import no torch (tests/bench_peer_variants.py).
"""
import fnmatch
import math

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
DEFAULT_COMPILE_MODES = ("default", "reduce-overhead")
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")  # the modes whose steps replay CUDA graphs
# Steps run before the timing's own warm-up: the compilation, and with CUDA graphs one eager
# warm-up run, the recording and a first replay.
WARMUP_STEPS = 3


def optimizer_variants(fused_available):
    return ["fused" if fused_available else "eager", "foreach-compiled"]


def precision_variants(precision):
    return ["autocast", "bf16-weights"] if precision == "bf16" else [precision]


def plan_variants(mode, precision, compile_modes, fused_available):
    """Every variant of a case, in the order they run: each compile mode with each optimizer
    (training) or precision (inference) variant."""
    subs = optimizer_variants(fused_available) if mode == "training" else precision_variants(precision)
    return [f"{m}/{s}" for m in compile_modes for s in subs]


def select_variants(names, spec):
    """The names that one of spec's comma-separated shell patterns matches; all of them when
    spec is empty or None."""
    patterns = [p.strip() for p in (spec or "").split(",") if p.strip()]
    if not patterns:
        return list(names)
    return [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)]


def best_variant(figures):
    """The name of the fastest variant in figures (name -> images/s; a variant that did not run
    has None or no entry), the first one listed on a tie; None when none ran."""
    best = None
    for name, ips in figures.items():
        if isinstance(ips, bool) or not isinstance(ips, (int, float)) or not math.isfinite(ips) or ips <= 0:
            continue
        if best is None or ips > figures[best]:
            best = name
    return best


def split_variant(name):
    """'reduce-overhead/fused' -> ('reduce-overhead', 'fused')."""
    mode, _, sub = name.partition("/")
    return mode, sub


# ---- the steps (torch needed from here on) ----------------------------------------------------


def fused_sgd_available(torch, cuda):
    import inspect
    return cuda and "fused" in inspect.signature(torch.optim.SGD).parameters


def reset_compiler(torch):
    """Forgets every compiled graph (and torch.compile's CUDA graphs), so that the next variant
    compiles from scratch on its own model."""
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and hasattr(compiler, "reset"):
        compiler.reset()
    else:
        torch._dynamo.reset()
    try:
        from torch._inductor import cudagraph_trees
        cudagraph_trees.reset_cudagraph_trees()
    except Exception:  # noqa: BLE001 - older or newer torch without it: reset() did what it could
        pass


def step_marker(torch, compile_mode, cuda):
    """torch.compiler.cudagraph_mark_step_begin where the mode replays CUDA graphs: each step is
    a new iteration, whose replay may overwrite the previous step's outputs."""
    if not cuda or compile_mode not in CUDA_GRAPH_MODES:
        return None
    return getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)


def make_preprocess(torch, ctx, dtype, augment):
    """u8 (N, C, H, W) -> the network's input, traced into the compiled step: Convoy's
    augmentation where the suite asks for it (training only), then normalization."""
    pad, flip = ctx["crop_padding"], ctx["horizontal_flip"]
    mean, std, fmt, augment_float = ctx["mean"], ctx["std"], ctx["memory_format"], ctx["augment_float"]

    def preprocess(u8):
        x = u8.float()
        if augment and (pad or flip):
            x = augment_float(torch, x, pad, flip)
        return ((x / 255.0 - mean) / std).to(dtype).contiguous(memory_format=fmt)
    return preprocess


def build_training_step(torch, net, name, ctx):
    """(step, last): one training step of variant `name` on `net` (fresh, on the device, in
    training mode), and the dict whose "out" holds the last step's loss (a copy)."""
    compile_mode, opt_kind = split_variant(name)
    cuda, bf16 = ctx["cuda"], ctx["bf16"]
    o = ctx["optimizer"]
    kwargs = dict(lr=float(o.get("lr", 0.01)), momentum=float(o.get("momentum", 0.9)),
                  nesterov=bool(o.get("nesterov", True)))
    if opt_kind == "fused":
        kwargs["fused"] = True
    elif opt_kind == "foreach-compiled" and cuda:
        kwargs["foreach"] = True
    opt = torch.optim.SGD(ctx["param_groups"](net, float(o.get("weight_decay", 5e-4))), **kwargs)
    preprocess = make_preprocess(torch, ctx, torch.float32, augment=True)
    smoothing = ctx["label_smoothing"]
    device_type = "cuda" if cuda else "cpu"

    def forward_loss(u8, labels):
        x = preprocess(u8)
        with torch.autocast(device_type=device_type, dtype=torch.bfloat16, enabled=bf16):
            logits = net(x)
        return torch.nn.functional.cross_entropy(logits.float(), labels, label_smoothing=smoothing)
    forward_loss = torch.compile(forward_loss, mode=compile_mode)
    if opt_kind == "foreach-compiled":
        # PyTorch's recipe: the step in torch.compile (default mode); its foreach kernels fuse.
        @torch.compile(fullgraph=False)
        def opt_step():
            opt.step()
    else:
        opt_step = opt.step
    mark = step_marker(torch, compile_mode, cuda)
    images, labels = ctx["images"], ctx["labels"]
    it = [0]
    last = {}

    def step():
        i = it[0] % len(images)
        it[0] += 1
        if mark is not None:
            mark()
        loss = forward_loss(images[i], labels[i])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt_step()
        last["out"] = loss.detach().clone()  # a CUDA graph's output is overwritten by its next replay
    return step, last


def build_inference_step(torch, net, name, ctx):
    """(step, last): one inference step of variant `name` on `net` (fresh, on the device); "out"
    in last is the step's logits, valid until the next step (copy them before running another)."""
    compile_mode, precision = split_variant(name)
    cuda = ctx["cuda"]
    net.eval()
    dtype, autocast = torch.float32, precision == "autocast"
    if precision == "bf16-weights":
        dtype = torch.bfloat16
        net.to(dtype)  # keeps channels-last: Tensor.to keeps the memory format
    preprocess = make_preprocess(torch, ctx, dtype, augment=False)
    device_type = "cuda" if cuda else "cpu"

    def infer(u8):
        x = preprocess(u8)
        with torch.autocast(device_type=device_type, dtype=torch.bfloat16, enabled=autocast):
            return net(x)
    infer = torch.compile(infer, mode=compile_mode)
    mark = step_marker(torch, compile_mode, cuda)
    images = ctx["images"]
    it = [0]
    last = {}

    def step():
        i = it[0] % len(images)
        it[0] += 1
        with torch.inference_mode():
            if mark is not None:
                mark()
            # No copy per step (it would cost the peer time at batch 1): the caller copies the
            # last step's logits right after the timing, before any other step.
            last["out"] = infer(images[i])
    return step, last
