#!/usr/bin/env python3
"""Torch's side of the interchange tests (Debian's python3-torch; no torchvision needed).

    torch_models.py state OUT_DIR    # small_resnet's state_dict as safetensors + golden logits
    torch_models.py onnx OUT_DIR     # the same net, GELU in the stem, exported by torch.onnx + golden logits
    torch_models.py resnet18 OUT_DIR [onnx]   # torchvision's resnet18 / resnet50, rebuilt module for
    torch_models.py resnet50 OUT_DIR [onnx]   # module: its state_dict (+ torch.onnx export) + golden logits
    torch_models.py mobile OUT_DIR   # a small net of the mobile families' patterns, exported by torch.onnx + golden logits
    torch_models.py mobilenet_v2 OUT_DIR [onnx]   # torchvision's (Debian's python3-torchvision): as resnet18;
    torch_models.py vgg11_bn OUT_DIR [onnx]       # vgg11_bn and densenet121 likewise, and the
                                                  # squeeze-and-excitation nets mobilenet_v3_small,
                                                  # efficientnet_b0 and regnet_y_400mf

The net mirrors tests/interchange/small_resnet.yaml with torchvision's module classes rebuilt in
torch.nn (conv1, bn1, layer1.0.conv1, layer2.0.downsample.0, fc), so its state_dict keys are
torchvision's, num_batches_tracked included. Batch-norm statistics are randomized so that they
matter. golden.safetensors holds `input` (2, 1, 28, 28) and `logits` computed in float64.
Exit status 3: torch is missing; 4: torchvision is missing where there is no rebuilt module tree
(the C++ test then skips, saying which).
"""
import json
import os
import struct
import sys

try:
    import torch
    import torch.nn as nn
except ImportError:
    sys.exit(3)

DTYPES = {torch.float32: "F32", torch.int64: "I64", torch.float64: "F64"}


def save_safetensors(path, tensors):
    """The safetensors format by its specification (Debian has no `safetensors` package)."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().contiguous().cpu().numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


class BasicBlock(nn.Module):
    def __init__(self, cin, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or cin != planes:
            self.downsample = nn.Sequential(nn.Conv2d(cin, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + (self.downsample(x) if self.downsample is not None else x))


class SmallResNet(nn.Module):
    def __init__(self, classes=5, stem_gelu=False):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.GELU() if stem_gelu else nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = nn.Sequential(BasicBlock(8, 8, 1))
        self.layer2 = nn.Sequential(BasicBlock(8, 16, 2))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer2(self.layer1(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class Bottleneck(nn.Module):
    """torchvision's Bottleneck (v1.5: the stride on the 3x3)."""

    def __init__(self, cin, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != planes * 4:
            self.downsample = nn.Sequential(nn.Conv2d(cin, planes * 4, 1, stride, bias=False), nn.BatchNorm2d(planes * 4))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + (self.downsample(x) if self.downsample is not None else x))


class ResNet(nn.Module):
    """torchvision.models.ResNet's module tree: conv1, bn1, relu, maxpool, layer1-4, avgpool, fc."""

    def __init__(self, bottleneck, blocks, classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin, expansion = 64, 4 if bottleneck else 1
        for i, (planes, n) in enumerate(zip((64, 128, 256, 512), blocks), start=1):
            layers = []
            for b in range(n):
                stride = 2 if i > 1 and b == 0 else 1
                layers.append(Bottleneck(cin, planes, stride) if bottleneck else BasicBlock(cin, planes, stride))
                cin = planes * expansion
            setattr(self, f"layer{i}", nn.Sequential(*layers))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * expansion, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class MobilePatterns(nn.Module):
    """What torch.onnx writes for the mobile families: ReLU6 (Clip), Hardswish (HardSwish),
    SiLU (Sigmoid and Mul), nn.AvgPool2d (a Pad of zeros before AveragePool), Hardsigmoid,
    Sigmoid, ceil_mode max pooling that adds no window (7x7, kernel 3, stride 2), x.mean((2, 3))
    (ReduceMean) and x.view(x.size(0), -1) (Shape, Gather, Unsqueeze, Concat, Reshape)."""

    def __init__(self, classes=5):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 2, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.act1 = nn.ReLU6(inplace=True)
        self.dw = nn.Conv2d(8, 8, 3, 1, 1, groups=8, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.act2 = nn.Hardswish()
        self.pw = nn.Conv2d(8, 16, 1)
        self.act3 = nn.SiLU()
        self.pool = nn.AvgPool2d(2)
        self.gate = nn.Conv2d(16, 16, 1)
        self.act4 = nn.Hardsigmoid()
        self.conv3 = nn.Conv2d(16, 16, 3, 1, 1)
        self.act5 = nn.Sigmoid()
        self.mpool = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.fc_mean = nn.Linear(16, classes)
        self.fc_flat = nn.Linear(16 * 3 * 3, classes)
        with torch.no_grad():  # wider weights: the activations reach their saturated sides
            for conv in (self.conv1, self.pw, self.gate):
                conv.weight.mul_(4.0)

    def forward(self, x):
        x = self.act2(self.bn2(self.dw(self.act1(self.bn1(self.conv1(x))))))
        x = self.pool(self.act3(self.pw(x)))
        x = self.mpool(self.act5(self.conv3(self.act4(self.gate(x)))))
        return self.fc_mean(x.mean((2, 3))) + self.fc_flat(x.view(x.size(0), -1))


def randomize_batch_norms(net):
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.3, 0.3)
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.num_batches_tracked.fill_(7)


def torchvision_net(arch, out, export):
    torch.manual_seed(4321)
    try:  # the real torchvision where it is installed (Debian's python3-torchvision, the GPU machine)
        import torchvision
        net = getattr(torchvision.models, arch)(weights=None)
        print("torchvision", torchvision.__version__)
    except ImportError:
        if not arch.startswith("resnet"):
            sys.exit(4)
        net = ResNet(arch == "resnet50", (3, 4, 6, 3) if arch == "resnet50" else (2, 2, 2, 2))
    randomize_batch_norms(net)
    net.eval()
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(98))
    with torch.no_grad():
        logits = net.double()(x.double()).float()
    net = net.float()
    save_safetensors(os.path.join(out, "golden.safetensors"), {"input": x, "logits": logits})
    save_safetensors(os.path.join(out, arch + ".safetensors"), dict(net.state_dict()))
    if export:
        onnx_export(net, x, os.path.join(out, arch + ".onnx"))


def onnx_export(net, x, path):
    """torch.onnx's TorchScript exporter, as users of torch 1.13 to 2.x know it (newer torch
    defaults to the dynamo exporter, which writes other graphs)."""
    import inspect
    extra = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(net, x, path, opset_version=17, input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, **extra)


def make_net(stem_gelu=False):
    torch.manual_seed(1234)
    net = SmallResNet(stem_gelu=stem_gelu)
    randomize_batch_norms(net)
    return net.eval()


def main():
    mode, out = sys.argv[1], sys.argv[2]
    if mode in ("resnet18", "resnet50", "mobilenet_v2", "vgg11_bn", "densenet121", "mobilenet_v3_small",
                "efficientnet_b0", "regnet_y_400mf"):
        return torchvision_net(mode, out, sys.argv[3:] == ["onnx"])
    if mode == "mobile":
        torch.manual_seed(2468)
        net = MobilePatterns()
        randomize_batch_norms(net)
        net.eval()
    else:
        net = make_net(stem_gelu=mode == "onnx")  # torch.onnx writes GELU as its erf formula (opset < 20)
    x = torch.randn(2, 1, 28, 28, generator=torch.Generator().manual_seed(99))
    with torch.no_grad():
        logits = net.double()(x.double()).float()  # float64 reference
    net = net.float()
    save_safetensors(os.path.join(out, "golden.safetensors"), {"input": x, "logits": logits})
    if mode == "state":
        save_safetensors(os.path.join(out, "state.safetensors"), dict(net.state_dict()))
    elif mode in ("onnx", "mobile"):
        onnx_export(net, x, os.path.join(out, "torch.onnx"))
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
