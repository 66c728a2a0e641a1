#!/usr/bin/env python3
"""Torch's side of the interchange tests (Debian's python3-torch; no torchvision needed).

    torch_models.py state OUT_DIR    # small_resnet's state_dict as safetensors + golden logits
    torch_models.py onnx OUT_DIR     # the same net, GELU in the stem, exported by torch.onnx + golden logits

The net mirrors tests/interchange/small_resnet.yaml with torchvision's module classes rebuilt in
torch.nn (conv1, bn1, layer1.0.conv1, layer2.0.downsample.0, fc), so its state_dict keys are
torchvision's, num_batches_tracked included. Batch-norm statistics are randomized so that they
matter. golden.safetensors holds `input` (2, 1, 28, 28) and `logits` computed in float64.
Exit status 3: torch is missing (the C++ test then skips).
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


def make_net(stem_gelu=False):
    torch.manual_seed(1234)
    net = SmallResNet(stem_gelu=stem_gelu)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.3, 0.3)
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.num_batches_tracked.fill_(7)
    return net.eval()


def main():
    mode, out = sys.argv[1], sys.argv[2]
    net = make_net(stem_gelu=mode == "onnx")  # torch.onnx writes GELU as its erf formula (opset < 20)
    x = torch.randn(2, 1, 28, 28, generator=torch.Generator().manual_seed(99))
    with torch.no_grad():
        logits = net.double()(x.double()).float()  # float64 reference
    net = net.float()
    save_safetensors(os.path.join(out, "golden.safetensors"), {"input": x, "logits": logits})
    if mode == "state":
        save_safetensors(os.path.join(out, "state.safetensors"), dict(net.state_dict()))
    elif mode == "onnx":
        torch.onnx.export(net, x, os.path.join(out, "torch.onnx"), opset_version=17, input_names=["input"],
                          output_names=["logits"], dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
