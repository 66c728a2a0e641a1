#!/usr/bin/env python3
"""The PyTorch side of the time-to-accuracy benchmark: Convoy's run config (e.g.
configs/fmnet.yaml) trained in PyTorch, the same recipe, timed the same way.

usage: pytorch_train.py --config configs/fmnet.yaml [--data DIR] [--device auto|cuda|cpu]
                        [--epochs N] [--train-limit N] [--test-limit N] [--threads N]
                        [--channels-last] [--compile] [--compile-mode MODE] --out metrics.csv

The same recipe as `convoy train`: the model built from the config's model YAML (every
Convoy layer type, DAG inputs included), SGD with momentum / Nesterov and weight decay on
conv and linear weights only, Convoy's learning-rate schedule formula per step (one-cycle
for fmnet), cross-entropy with label smoothing, random crop with zero padding + horizontal
flip, the batch size and epochs of the config, drop_last, bf16 autocast on the GPU when the
config says precision: bf16 (fp32 on the CPU, as Convoy); TF32 convolutions and matmuls on the
GPU where it says tf32, exact fp32 (TF32 off, as Convoy's fp32) where it says fp32. The data (Fashion-MNIST IDX files)
is loaded onto the device once; batches are shuffled and augmented there. As a careful PyTorch
user sets it up: SGD's fused kernel on the GPU where the installed torch has it (one kernel per
parameter group instead of a loop over tensors), and with --compile the model in torch.compile's
--compile-mode (default; reduce-overhead replays CUDA graphs, marking each step's start).

Time, as in Convoy's metrics.csv: per-epoch training wall seconds, synchronized at the end
of the epoch; evaluation on the test set after each epoch is not counted. Writes a CSV with
Convoy's columns (epoch,step,lr,train_loss,train_accuracy,test_loss,test_accuracy,
epoch_seconds,images_per_second) and prints one JSON summary line last.
"""
import argparse
import json
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convoy_model as cm  # noqa: E402
import torch_variants as tv  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def find_data(explicit, configured):
    candidates = [explicit] if explicit else []
    candidates += [configured, "/usr/share/datasets/fashion-mnist",
                   os.path.join(REPO, ".deps/usr/share/datasets/fashion-mnist")]
    for c in candidates:
        if c and os.path.isdir(c):
            return c
    raise SystemExit(f"pytorch_train.py: Fashion-MNIST not found in any of {candidates} (give --data DIR)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--data")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--epochs", type=int)
    ap.add_argument("--train-limit", type=int, default=0)
    ap.add_argument("--test-limit", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (torch 2)")
    ap.add_argument("--compile-mode", choices=["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"],
                    help="torch.compile's mode (implies --compile; default: default)")
    ap.add_argument("--out", required=True, help="metrics CSV to write")
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    cfg = cm.load_yaml(args.config)
    base = os.path.dirname(os.path.abspath(args.config))
    model_path = os.path.normpath(os.path.join(base, cfg["model"]))
    data_cfg = cfg.get("dataset", {}) or {}
    if data_cfg.get("kind", "fashion-mnist") not in ("fashion-mnist", "mnist"):
        raise SystemExit("pytorch_train.py: only fashion-mnist / mnist IDX datasets are supported")
    configured = data_cfg.get("path", "/usr/share/datasets/fashion-mnist")
    if configured and not os.path.isabs(configured):
        configured = os.path.normpath(os.path.join(base, configured))
    data_dir = find_data(args.data, configured)
    norm = data_cfg.get("normalize", {}) or {}
    aug = data_cfg.get("augment", {}) or {}
    batch = int(cfg.get("batch_size", 128))
    epochs = int(args.epochs or cfg.get("epochs", 1))
    opt_cfg = cfg.get("optimizer", {}) or {}
    if opt_cfg.get("type", "sgd") != "sgd":
        raise SystemExit("pytorch_train.py: only the sgd optimizer is supported")
    schedule = cfg.get("schedule", {}) or {}
    smoothing = float(cfg.get("label_smoothing", 0.0))
    seed = int(cfg.get("seed", 42))
    precision = cfg.get("precision", "fp32")

    if args.device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    else:
        device = args.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"pytorch_train.py: device {device} asked for, but torch.cuda.is_available() is False")
    cuda = device.startswith("cuda")
    bf16 = precision == "bf16" and cuda
    channels_last = args.channels_last and cuda
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    tf32 = precision == "tf32" and cuda
    if cuda:  # the config's cudnn_benchmark, as Convoy reads it
        torch.backends.cudnn.benchmark = bool(cfg.get("cudnn_benchmark", True))
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32

    torch.manual_seed(seed)
    net = cm.build_model(cm.load_yaml(model_path)).to(device)
    if channels_last:
        net = net.to(memory_format=torch.channels_last)
    compile_mode = args.compile_mode or ("default" if args.compile else None)
    model = torch.compile(net, mode=compile_mode) if compile_mode else net
    # Under CUDA graphs (reduce-overhead, max-autotune) each step's outputs live until the next
    # replay: the step's start is marked, and its loss and logits are read before the next one.
    mark_step = tv.step_marker(torch, compile_mode, cuda)
    train_x, train_y = cm.load_fashion_mnist(data_dir, "train", args.train_limit)
    test_x, test_y = cm.load_fashion_mnist(data_dir, "test", args.test_limit)
    train_x, train_y, test_x, test_y = (t.to(device) for t in (train_x, train_y, test_x, test_y))
    channels = net.input_shape[0]
    mean_v = norm.get("mean", [0.2860])
    std_v = norm.get("std", [0.3530])
    mean = torch.tensor(mean_v * channels if len(mean_v) == 1 else mean_v, device=device).view(1, -1, 1, 1)
    std = torch.tensor(std_v * channels if len(std_v) == 1 else std_v, device=device).view(1, -1, 1, 1)

    lr = float(opt_cfg.get("lr", 0.1))
    fused = tv.fused_sgd_available(torch, cuda)
    opt = torch.optim.SGD(cm.param_groups(net, float(opt_cfg.get("weight_decay", 0.0))), lr=lr,
                          momentum=float(opt_cfg.get("momentum", 0.9)), nesterov=bool(opt_cfg.get("nesterov", False)),
                          **({"fused": True} if fused else {}))
    n = train_x.shape[0]
    steps_per_epoch = n // batch  # drop_last, as Convoy's loader
    if steps_per_epoch == 0:
        raise SystemExit(f"pytorch_train.py: batch {batch} is larger than the {n} training images")
    total_steps = steps_per_epoch * epochs
    pad, flip = int(aug.get("crop_padding", 0)), bool(aug.get("horizontal_flip", False))
    gen = torch.Generator(device=device).manual_seed(seed)

    def evaluate():
        net.eval()
        loss_sum, correct = torch.zeros((), device=device), torch.zeros((), device=device, dtype=torch.int64)
        with torch.inference_mode():
            for b in range(0, test_x.shape[0], max(batch, 256)):
                if mark_step is not None:
                    mark_step()
                x = ((test_x[b:b + max(batch, 256)].float() / 255.0 - mean) / std).contiguous(memory_format=fmt)
                y = test_y[b:b + max(batch, 256)]
                with torch.autocast(device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16, enabled=bf16):
                    logits = model(x)
                loss_sum += F.cross_entropy(logits.float(), y, reduction="sum")
                correct += (logits.argmax(1) == y).sum()
        net.train()
        return float(loss_sum) / test_x.shape[0], int(correct) / test_x.shape[0]

    log(f"pytorch_train.py: torch {torch.__version__}, {net.name} on {device}"
        f"{' (' + torch.cuda.get_device_name(device) + ')' if cuda else ''}, {'bf16 autocast' if bf16 else 'fp32'}, "
        f"{n} training images, batch {batch}, {epochs} epochs, {steps_per_epoch} steps/epoch, "
        f"SGD {'fused' if fused else 'foreach/loop'}, {'torch.compile ' + compile_mode if compile_mode else 'eager'}")
    if cuda:
        # Set-up before the clock, as `convoy train` does it (TrainStep::prepare): one step's
        # forward and backward on a batch of zeros (cuDNN's plans, the kernels' loading,
        # torch.compile's compilation), then the running statistics put back and no update.
        kept = {k: v.clone() for k, v in net.state_dict().items()}
        x0 = torch.zeros((batch,) + tuple(train_x.shape[1:]), device=device).contiguous(memory_format=fmt)
        if mark_step is not None:
            mark_step()
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=bf16):
            logits = model(x0)
        F.cross_entropy(logits.float(), torch.zeros(batch, dtype=torch.int64, device=device),
                        label_smoothing=smoothing).backward()
        opt.zero_grad(set_to_none=True)
        net.load_state_dict(kept)
        torch.cuda.synchronize()
    rows = []
    step = 0
    total_train = 0.0
    with open(args.out, "w") as csv:
        csv.write("epoch,step,lr,train_loss,train_accuracy,test_loss,test_accuracy,epoch_seconds,images_per_second\n")
        for epoch in range(epochs):
            net.train()
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
            perm = torch.randperm(n, device=device, generator=gen)
            loss_sum = torch.zeros((), device=device)
            correct = torch.zeros((), device=device, dtype=torch.int64)
            for b in range(steps_per_epoch):
                idx = perm[b * batch:(b + 1) * batch]
                x = ((cm.augment(train_x[idx], pad, flip, generator=gen) / 255.0 - mean) / std).contiguous(memory_format=fmt)
                y = train_y[idx]
                current_lr = cm.scheduled_lr(schedule, lr, step, steps_per_epoch, total_steps)
                for g in opt.param_groups:
                    g["lr"] = current_lr
                if mark_step is not None:
                    mark_step()
                with torch.autocast(device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16, enabled=bf16):
                    logits = model(x)
                loss = F.cross_entropy(logits.float(), y, label_smoothing=smoothing)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                loss_sum += loss.detach()
                correct += (logits.detach().argmax(1) == y).sum()
                step += 1
            if cuda:
                torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            total_train += seconds
            test_loss, test_acc = evaluate()
            train_loss = float(loss_sum) / steps_per_epoch
            train_acc = int(correct) / (steps_per_epoch * batch)
            ips = steps_per_epoch * batch / seconds
            csv.write(f"{epoch + 1},{step},{current_lr},{train_loss},{train_acc},{test_loss},{test_acc},{seconds},{ips}\n")
            csv.flush()
            rows.append((epoch + 1, seconds, test_acc))
            log(f"epoch {epoch + 1}/{epochs}: train loss {train_loss:.4f}, test loss {test_loss:.4f}, "
                f"test accuracy {100 * test_acc:.2f}% ({seconds:.1f} s, {ips:.0f} img/s)")
    print(json.dumps({"engine": "pytorch", "torch_version": torch.__version__, "device": device,
                      "compile_mode": compile_mode, "fused_sgd": fused,
                      "precision": "bf16" if bf16 else "tf32" if tf32 else "fp32", "epochs": epochs, "train_seconds": total_train,
                      "final_test_accuracy": rows[-1][2] if rows else None, "metrics": args.out}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
