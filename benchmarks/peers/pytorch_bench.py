#!/usr/bin/env python3
"""PyTorch (and ONNX Runtime) peer of `convoy bench`: the same network built from the same
model YAML, the same batch sizes, precisions, inputs and timing method.

usage:
  pytorch_bench.py --cases peer_cases.json            (what `convoy bench` runs)
  pytorch_bench.py --model models/fmnet.yaml --mode training --batch 64 --batch 512 \\
                   --device cuda --precision bf16 [--channels-last] [--peers pytorch,onnxruntime] \\
                   [--compile-modes default,reduce-overhead] [--threads N] [--quick]

Prints one JSON record per case and peer on stdout (the fields of Convoy's records:
engine, model, mode, batch, device, precision, status, images_per_second, p50_ms, p99_ms,
...); progress goes to stderr. A peer that cannot run here is reported, never faked:
status "skipped" (no GPU for torch) or "missing" (torch / onnxruntime / torch.compile not
importable), with the reason.

What is timed, per iteration (random u8 images and labels already on the device, rotated):
  training:  augment as the suite's training.augment says (random crop with padding, flip; what
             Convoy's bench applies) and normalize, forward, cross-entropy with label smoothing,
             backward, SGD (momentum, Nesterov, weight decay) step
  inference: normalize and forward, in torch.inference_mode (eval-mode batch norm)
bf16: torch.autocast(device_type="cuda", dtype=torch.bfloat16) with fp32 weights, as Convoy's
mixed precision.
pytorch: eager, as most scripts run it (the baseline). pytorch_compiled: PyTorch at its best,
the fastest of several setups (torch_variants.py): each of the request's compile_modes
(default: default and reduce-overhead) with the optimizer fused or its step compiled
(training), with autocast or bf16 weights (bf16 inference); augmentation and normalization are
compiled into the step; compilation and warm-up stay outside the timing. fp32 is exact on both sides (torch.backends.cudnn.allow_tf32 and
torch.backends.cuda.matmul.allow_tf32 off, where PyTorch's own default runs convolutions in TF32);
tf32 turns both on, as Convoy's precision tf32.
ONNX Runtime: CPU inference only; the module, normalization included (u8 in),
exported to ONNX and run with the CPUExecutionProvider with the same thread count: Python's onnxruntime where
importable, else npm's onnxruntime-node through onnxruntime_bench.mjs (scripts/install-onnxruntime-node.sh).
"""
import argparse
import gc
import json
import os
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
# The CPUs this process may use, read before torch loads OpenMP: under OMP_PROC_BIND, OpenMP pins
# this thread to one CPU, and ONNX Runtime's threads or Node would inherit only that one.
PROCESS_CPUS = os.sched_getaffinity(0)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convoy_model as cm  # noqa: E402
import torch_variants as tv  # noqa: E402


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def emit(record):
    print(json.dumps(record), flush=True)


def base_record(engine, case):
    return {"engine": engine, "model": case["model"], "model_path": case["model_path"], "mode": case["mode"],
            "batch": int(case["batch"]), "device": case["device"], "precision": case["precision"]}


class Peer:
    def __init__(self, request):
        self.request = request
        self.timing = request["timing"]
        self.threads = int(request.get("threads") or 0)
        self.torch = None
        self.torch_error = None
        try:
            import torch
            self.torch = torch
            if self.threads > 0:
                torch.set_num_threads(self.threads)
        except Exception as e:  # noqa: BLE001 - any import failure means "missing"
            self.torch_error = f"torch is not importable by {sys.executable}: {e}"
        self.ort = None
        self.ort_error = None
        try:
            import onnxruntime
            self.ort = onnxruntime
        except Exception as e:  # noqa: BLE001
            self.ort_error = f"onnxruntime is not importable by {sys.executable}: {e}"
        self.onnx_dir = tempfile.mkdtemp(prefix="convoy_peer_onnx_")
        self.exported = {}

    # -- helpers --------------------------------------------------------------------------

    def device_problem(self, device):
        torch = self.torch
        if device.startswith("cuda"):
            if not torch.cuda.is_available():
                return (f"torch {torch.__version__}: torch.cuda.is_available() is False"
                        f" (built with CUDA {torch.version.cuda})")
            index = int(device.split(":")[1]) if ":" in device else 0
            if index >= torch.cuda.device_count():
                return f"{device} does not exist: torch sees {torch.cuda.device_count()} GPU(s)"
        return None

    def inputs(self, net, case, device):
        torch = self.torch
        gen = torch.Generator().manual_seed(int(self.request.get("seed", 1)) * 1000003 + int(case["batch"]))
        shape = (int(case["batch"]),) + tuple(net.input_shape)
        images, labels = [], []
        for _ in range(int(self.request.get("input_sets", 4))):
            images.append(torch.randint(0, 256, shape, dtype=torch.uint8, generator=gen).to(device))
            labels.append(torch.randint(0, net.num_classes, (shape[0],), generator=gen).to(device))
        return images, labels

    def norm_tensors(self, channels, device):
        torch = self.torch
        n = self.request.get("normalize", {"mean": [0.5], "std": [0.25]})
        mean = n["mean"] * channels if len(n["mean"]) == 1 else n["mean"]
        std = n["std"] * channels if len(n["std"]) == 1 else n["std"]
        return (torch.tensor(mean, device=device).view(1, -1, 1, 1),
                torch.tensor(std, device=device).view(1, -1, 1, 1))

    def finish(self, rec, result, flops_per_image, batch):
        rec.update({"status": "ok", "images_per_second": batch / result["median"],
                    "ms_per_iteration": result["median"] * 1e3, "p50_ms": result["p50"] * 1e3,
                    "p99_ms": result["p99"] * 1e3, "latency_samples": len(result["latencies"]),
                    "warmup_iterations": result["warmup_iterations"], "rounds": result["rounds"],
                    "iterations_per_round": result["iterations_per_round"], "spread": result["spread"],
                    "stable": result["stable"], "seconds": result["seconds"],
                    "forward_flops_per_image": flops_per_image})
        flops = flops_per_image * batch * (3 if rec["mode"] == "training" else 1)
        rec["flops_per_iteration"] = flops
        rec["tflops"] = flops / result["median"] / 1e12
        return rec

    # -- PyTorch --------------------------------------------------------------------------

    def run_torch(self, case, compiled):
        engine = "pytorch_compiled" if compiled else "pytorch"
        rec = base_record(engine, case)
        if self.torch is None:
            rec.update(status="missing", reason=self.torch_error)
            return rec
        torch = self.torch
        rec["torch_version"] = torch.__version__
        if compiled and not hasattr(torch, "compile"):
            rec.update(status="missing", reason=f"torch {torch.__version__} has no torch.compile")
            return rec
        device = case["device"]
        problem = self.device_problem(device)
        if problem:
            rec.update(status="skipped", reason=problem)
            return rec
        if device == "cpu" and case["precision"] in ("bf16", "tf32"):
            rec.update(status="skipped", reason=f"{case['precision']} is compared on the GPU only (Convoy's CPU path is fp32)")
            return rec
        cuda = device.startswith("cuda")
        channels_last = bool(self.request.get("channels_last")) and cuda
        rec["layout"] = "nhwc" if channels_last else "nchw"
        rec["device_name"] = torch.cuda.get_device_name(device) if cuda else "cpu"
        try:
            net, flops_per_image = self.fresh_net(case, channels_last)
            if cuda:
                torch.backends.cudnn.benchmark = True
                tf32 = case["precision"] == "tf32"
                torch.backends.cudnn.allow_tf32 = tf32
                torch.backends.cuda.matmul.allow_tf32 = tf32
            images, labels = self.inputs(net, case, device)
            mean, std = self.norm_tensors(net.input_shape[0], device)
            a = self.request.get("augment", {})
            ctx = {"cuda": cuda, "bf16": case["precision"] == "bf16", "images": images, "labels": labels,
                   "mean": mean, "std": std,
                   "memory_format": torch.channels_last if channels_last else torch.contiguous_format,
                   # Exactly the suite's augmentation, as Convoy's bench applies it (crop padding 2 and
                   # the flip when the suite has no training.augment; nothing when it turns both off).
                   "crop_padding": int(a.get("crop_padding", 2)), "horizontal_flip": bool(a.get("horizontal_flip", True)),
                   "optimizer": self.request.get("optimizer", {}),
                   "label_smoothing": float(self.request.get("label_smoothing", 0.1)),
                   "param_groups": cm.param_groups, "augment_float": cm.augment_float}
            if compiled:
                del net
                return self.run_compiled(rec, case, ctx, flops_per_image, channels_last)
            step, last = self.eager_step(net, case, ctx)
            result = cm.measure(step, self.timing, cuda=cuda)
            out = last.get("loss", last.get("logits"))
            if not bool(torch.isfinite(out.float()).all()):
                raise RuntimeError("non-finite loss or logits")
            if "loss" in last:
                rec["final_loss"] = float(last["loss"])
            return self.finish(rec, result, flops_per_image, int(case["batch"]))
        except Exception as e:  # noqa: BLE001 - reported per case
            rec.update(status="failed", reason=f"{type(e).__name__}: {e}")
            return rec

    def fresh_net(self, case, channels_last):
        """The case's network from its YAML, seeded alike each time, on the device."""
        torch = self.torch
        torch.manual_seed(int(self.request.get("seed", 1)))
        net = cm.build_model(cm.load_yaml(case["model_path"]))
        flops_per_image = cm.forward_flops(net)
        net = net.to(case["device"])
        if channels_last:
            net = net.to(memory_format=torch.channels_last)
        return net, flops_per_image

    def eager_step(self, net, case, ctx):
        """The eager peer's step (PyTorch as most scripts run it: the baseline) and the dict that
        holds its last loss or logits."""
        torch = self.torch
        cuda, bf16, fmt = ctx["cuda"], ctx["bf16"], ctx["memory_format"]
        images, labels, mean, std = ctx["images"], ctx["labels"], ctx["mean"], ctx["std"]
        it = [0]
        last = {}
        if case["mode"] == "training":
            net.train()
            o = ctx["optimizer"]
            opt = torch.optim.SGD(cm.param_groups(net, float(o.get("weight_decay", 5e-4))), lr=float(o.get("lr", 0.01)),
                                  momentum=float(o.get("momentum", 0.9)), nesterov=bool(o.get("nesterov", True)))
            pad, flip = ctx["crop_padding"], ctx["horizontal_flip"]
            smoothing = ctx["label_smoothing"]

            def step():
                i = it[0] % len(images)
                it[0] += 1
                x = cm.augment(images[i], pad, flip) if pad or flip else images[i].float()
                x = ((x / 255.0 - mean) / std).contiguous(memory_format=fmt)
                with torch.autocast(device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16, enabled=bf16):
                    logits = net(x)
                loss = torch.nn.functional.cross_entropy(logits.float(), labels[i], label_smoothing=smoothing)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                last["loss"] = loss
        else:
            net.eval()

            def step():
                i = it[0] % len(images)
                it[0] += 1
                with torch.inference_mode():
                    x = ((images[i].float() / 255.0 - mean) / std).contiguous(memory_format=fmt)
                    with torch.autocast(device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16, enabled=bf16):
                        last["logits"] = net(x)
        return step, last

    def run_compiled(self, rec, case, ctx, flops_per_image, channels_last):
        """torch.compile's peer: every variant of torch_variants on a fresh model, compiled and
        warmed up outside the timing; the record is the fastest variant's, with each variant's
        img/s in `variants` and its compilation + warm-up seconds in `compile_seconds`."""
        torch = self.torch
        modes = list(self.request.get("compile_modes") or tv.DEFAULT_COMPILE_MODES)
        unknown = [m for m in modes if m not in tv.COMPILE_MODES]
        if unknown:
            rec.update(status="failed", reason=f"compile_modes: {unknown} not among {list(tv.COMPILE_MODES)}")
            return rec
        training = case["mode"] == "training"
        planned = tv.plan_variants(case["mode"], case["precision"], modes, tv.fused_sgd_available(torch, ctx["cuda"]))
        spec = os.environ.get("CONVOY_PEER_VARIANTS", "")
        names = tv.select_variants(planned, spec)
        if not names:
            rec.update(status="skipped", reason=f"CONVOY_PEER_VARIANTS={spec} matches none of {planned}")
            return rec
        batch = int(case["batch"])
        figures, failures, compile_seconds, results = {}, {}, {}, {}
        sync = torch.cuda.synchronize if ctx["cuda"] else (lambda: None)
        for name in names:
            tv.reset_compiler(torch)
            try:
                net, _ = self.fresh_net(case, channels_last)
                build = tv.build_training_step if training else tv.build_inference_step
                step, last = build(torch, net, name, ctx)
                begin = time.perf_counter()
                for _ in range(tv.WARMUP_STEPS):
                    step()
                sync()
                compile_seconds[name] = round(time.perf_counter() - begin, 2)
                log(f"    {name}: compiled and warmed up in {compile_seconds[name]:.1f} s")
                result = cm.measure(step, self.timing, cuda=ctx["cuda"])
                out = last["out"].detach().clone()  # before anything else replays a CUDA graph
                if not bool(torch.isfinite(out.float()).all()):
                    raise RuntimeError("non-finite loss or logits")
                figures[name] = batch / result["median"]
                results[name] = (result, float(out) if training else None)
                log(f"    {name}: {figures[name]:.4g} img/s")
            except Exception as e:  # noqa: BLE001 - one variant's failure leaves the others
                failures[name] = f"{type(e).__name__}: {str(e)[:400]}"
                log(f"    {name}: failed: {failures[name]}")
            finally:
                # The variant's model, optimizer state, compiled code and CUDA graph pools go
                # before the next one starts, so it runs with the device's memory to itself.
                net = step = last = None
                tv.reset_compiler(torch)
                gc.collect()
                if ctx["cuda"]:
                    torch.cuda.empty_cache()
        rec["variants"] = figures
        rec["compile_seconds"] = compile_seconds
        if failures:
            rec["variant_failures"] = failures
        best = tv.best_variant(figures)
        if best is None:
            rec.update(status="failed", reason="every variant failed: " + "; ".join(f"{n}: {r}" for n, r in failures.items()))
            return rec
        rec["variant"] = best
        rec["compile_mode"], sub = tv.split_variant(best)
        rec["optimizer_variant" if training else "precision_variant"] = sub
        result, final_loss = results[best]
        if final_loss is not None:
            rec["final_loss"] = final_loss
        return self.finish(rec, result, flops_per_image, batch)

    # -- ONNX Runtime ---------------------------------------------------------------------

    def export(self, case):
        torch = self.torch
        path = case["model_path"]
        if path in self.exported:
            return self.exported[path]
        torch.manual_seed(int(self.request.get("seed", 1)))
        net = cm.build_model(cm.load_yaml(path)).eval()
        mean, std = self.norm_tensors(net.input_shape[0], "cpu")

        class Normalized(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.net = net
                self.register_buffer("mean", mean)
                self.register_buffer("std", std)

            def forward(self, images):  # u8 (N, C, H, W)
                return self.net((images.float() / 255.0 - self.mean) / self.std)

        wrapper = Normalized().eval()
        out = os.path.join(self.onnx_dir, f"{net.name}.onnx")
        dummy = torch.randint(0, 256, (2,) + tuple(net.input_shape), dtype=torch.uint8)
        kwargs = dict(input_names=["images"], output_names=["logits"],
                      dynamic_axes={"images": {0: "n"}, "logits": {0: "n"}}, opset_version=17)
        import inspect
        if "dynamo" in inspect.signature(torch.onnx.export).parameters:
            kwargs["dynamo"] = False  # the TorchScript exporter first: it needs no onnxscript
        try:
            torch.onnx.export(wrapper, (dummy,), out, **kwargs)
        except Exception as legacy:  # noqa: BLE001 - then the dynamo exporter, where there is one
            if "dynamo" not in kwargs:
                raise
            kwargs.pop("dynamo")
            kwargs.pop("dynamic_axes")
            try:
                batch = torch.export.Dim("n", min=1)
                torch.onnx.export(wrapper, (dummy,), out, dynamo=True, dynamic_shapes=({0: batch},), **kwargs)
            except Exception as dynamo:  # noqa: BLE001
                raise RuntimeError(f"ONNX export failed: TorchScript exporter: {legacy}; dynamo exporter: {dynamo}")
        self.exported[path] = (out, net, cm.forward_flops(net))
        return self.exported[path]

    def node_peer(self):
        """(node, script) for onnxruntime_bench.mjs with npm's onnxruntime-node, or (None, why)."""
        import shutil
        here = os.path.dirname(os.path.abspath(__file__))
        script = os.path.join(here, "onnxruntime_bench.mjs")
        node_dir = os.environ.get("CONVOY_ORT_NODE_DIR") or os.path.join(here, "..", "..", "third_party", "node")
        node = shutil.which("node")
        if node is None:
            return None, "no node on PATH"
        if not os.path.exists(os.path.join(node_dir, "node_modules", "onnxruntime-node", "package.json")):
            return None, f"onnxruntime-node not in {os.path.normpath(node_dir)} (bash scripts/install-onnxruntime-node.sh)"
        return node, script

    def run_ort_node(self, rec, case, node, script):
        """ONNX Runtime through Node: the same exported model, inputs of the same shape, the same timing."""
        import subprocess
        rec["onnxruntime_api"] = "node (onnxruntime-node)"
        rec["layout"] = "nchw"
        rec["device_name"] = "cpu"
        try:
            path, net, flops_per_image = self.export(case)
            shape = [int(case["batch"])] + [int(d) for d in net.input_shape]
            cmd = [node, script, "--model", path, "--shape", ",".join(map(str, shape)),
                   "--threads", str(self.threads), "--timing", json.dumps(self.timing),
                   "--input-sets", str(int(self.request.get("input_sets", 4))),
                   "--seed", str(int(self.request.get("seed", 1)))]
            p = subprocess.run(cmd, capture_output=True, text=True,
                               preexec_fn=lambda: os.sched_setaffinity(0, PROCESS_CPUS))
            if p.returncode != 0:
                raise RuntimeError(p.stderr.strip() or f"node exited with status {p.returncode}")
            result = json.loads(p.stdout.strip().splitlines()[-1])
            rec["onnxruntime_version"] = result.pop("onnxruntime_version", "")
            return self.finish(rec, result, flops_per_image, int(case["batch"]))
        except Exception as e:  # noqa: BLE001
            rec.update(status="failed", reason=f"{type(e).__name__}: {e}")
            return rec

    def run_ort(self, case):
        rec = base_record("onnxruntime", case)
        if self.torch is None:
            rec.update(status="missing", reason="the ONNX model is exported with torch: " + self.torch_error)
            return rec
        if self.ort is None:
            node, script = self.node_peer()
            if node is None:
                rec.update(status="missing", reason=f"{self.ort_error}; and the Node peer: {script}")
                return rec
            return self.run_ort_node(rec, case, node, script)
        rec["onnxruntime_api"] = "python"
        ort = self.ort
        rec["onnxruntime_version"] = ort.__version__
        rec["layout"] = "nchw"
        rec["device_name"] = "cpu"
        try:
            path, net, flops_per_image = self.export(case)
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            if self.threads > 0:
                so.intra_op_num_threads = self.threads
            so.inter_op_num_threads = 1
            os.sched_setaffinity(0, PROCESS_CPUS)  # ONNX Runtime's threads inherit this thread's CPUs
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            images, _ = self.inputs(net, case, "cpu")
            feeds = [{"images": img.numpy()} for img in images]
            it = [0]
            last = {}

            def step():
                last["logits"] = sess.run(None, feeds[it[0] % len(feeds)])[0]
                it[0] += 1
            result = cm.measure(step, self.timing, cuda=False)
            import numpy as np
            if not np.isfinite(last["logits"]).all():
                raise RuntimeError("non-finite logits")
            return self.finish(rec, result, flops_per_image, int(case["batch"]))
        except Exception as e:  # noqa: BLE001
            rec.update(status="failed", reason=f"{type(e).__name__}: {e}")
            return rec

    # -- all ------------------------------------------------------------------------------

    def run(self):
        peers = self.request.get("peers", ["pytorch", "onnxruntime"])
        jobs = []
        for case in self.request["cases"]:
            for peer in peers:
                if peer == "onnxruntime" and not (case["mode"] == "inference" and case["device"] == "cpu"
                                                  and case["precision"] == "fp32"):
                    continue  # ONNX Runtime is the CPU-inference peer only
                jobs.append((peer, case))
        for n, (peer, case) in enumerate(jobs, 1):
            label = f"{case['model']} {case['mode']} b{case['batch']} {case['device']} {case['precision']}"
            if peer == "onnxruntime":
                rec = self.run_ort(case)
            else:
                rec = self.run_torch(case, compiled=peer == "pytorch_compiled")
            if rec["status"] == "ok":
                msg = (f"{rec['images_per_second']:.4g} img/s, p50 {rec['p50_ms']:.3g} ms, p99 {rec['p99_ms']:.3g} ms"
                       f"{'' if rec['stable'] else ', NOT stable'}"
                       f"{' (the fastest variant: ' + rec['variant'] + ')' if 'variant' in rec else ''}")
            else:
                msg = f"{rec['status']}: {rec.get('reason', '')}"
            log(f"  [{n}/{len(jobs)}] {peer} {label}: {msg}")
            emit(rec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", help="the request file written by convoy bench")
    ap.add_argument("--model", help="model YAML (standalone use)")
    ap.add_argument("--mode", choices=["training", "inference"], default="inference")
    ap.add_argument("--batch", type=int, action="append", help="batch size (repeatable)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", choices=["fp32", "bf16", "tf32"], default="fp32")
    ap.add_argument("--channels-last", action="store_true", help="channels_last memory format on the GPU")
    ap.add_argument("--peers", default="pytorch,onnxruntime", help="pytorch, pytorch_compiled, onnxruntime")
    ap.add_argument("--compile-modes", default=",".join(tv.DEFAULT_COMPILE_MODES),
                    help="torch.compile modes pytorch_compiled tries, comma-separated: " + ", ".join(tv.COMPILE_MODES))
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="short timing (smoke test)")
    args = ap.parse_args()
    modes = [m for m in args.compile_modes.split(",") if m]
    if not modes or any(m not in tv.COMPILE_MODES for m in modes):
        ap.error(f"--compile-modes: '{args.compile_modes}' is not a list of: {', '.join(tv.COMPILE_MODES)}")
    if args.cases:
        with open(args.cases) as f:
            request = json.load(f)
    elif args.model:
        name = cm.load_yaml(args.model).get("name", "model")
        request = {"cases": [{"model_path": os.path.abspath(args.model), "model": name, "mode": args.mode,
                              "batch": b, "device": args.device, "precision": args.precision}
                             for b in (args.batch or [64])],
                   "timing": cm.QUICK_TIMING if args.quick else cm.DEFAULT_TIMING, "threads": args.threads,
                   "channels_last": args.channels_last, "peers": [p for p in args.peers.split(",") if p],
                   "compile_modes": modes,
                   "normalize": {"mean": [0.2860], "std": [0.3530]}}
    else:
        ap.error("give --cases FILE or --model YAML")
    Peer(request).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
