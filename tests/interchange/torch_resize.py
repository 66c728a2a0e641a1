#!/usr/bin/env python3
"""Torch's side of the upsample and softmax import test (Debian's python3-torch).

    torch_resize.py OUT_DIR    # the net below exported by torch.onnx (torch.onnx) + golden logits

The net upsamples as torch users write it: nn.Upsample(scale_factor=2) (nearest: Resize with
constant scales, asymmetric/floor), nn.Upsample(scale_factor=2, mode="bilinear") (half_pixel),
F.interpolate(size=...) bilinear down in H and up in W by no whole factor and nearest by a whole
one (Resize with sizes from Shape, Slice and Concat), softmax over the channels of planes, and
softmax(dim=-1) of the logits (Softmax axis -1). golden.safetensors holds `input` (2, 1, 28, 28)
and `logits` computed in float64. Exit status 3: torch is missing.
"""
import os
import sys

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    sys.exit(3)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_models import onnx_export, save_safetensors  # noqa: E402


class UpsampleSoftmax(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 2, 1)
        self.up1 = nn.Upsample(scale_factor=2)
        self.conv2 = nn.Conv2d(8, 8, 3, 2, 1)
        self.up2 = nn.Upsample(scale_factor=2, mode="bilinear")
        self.conv3 = nn.Conv2d(8, 6, 1)
        self.fc = nn.Linear(6, classes)
        with torch.no_grad():  # wider logits: the softmaxes are far from uniform
            self.conv3.weight.mul_(3.0)
            self.fc.weight.mul_(4.0)

    def forward(self, x):
        x = self.up1(torch.relu(self.conv1(x)))            # 14x14 -> 28x28
        x = self.up2(torch.relu(self.conv2(x)))            # 14x14 -> 28x28
        x = F.interpolate(x, size=(20, 33), mode="bilinear")
        x = F.interpolate(x, size=(40, 66))                # nearest, a whole factor
        x = torch.softmax(self.conv3(x), dim=1)            # per pixel over the channels
        return torch.softmax(self.fc(x.mean((2, 3))), dim=-1)


def main():
    out = sys.argv[1]
    torch.manual_seed(1357)
    net = UpsampleSoftmax().eval()
    x = torch.randn(2, 1, 28, 28, generator=torch.Generator().manual_seed(97))
    with torch.no_grad():
        logits = net.double()(x.double()).float()
    net = net.float()
    save_safetensors(os.path.join(out, "golden.safetensors"), {"input": x, "logits": logits})
    onnx_export(net, x, os.path.join(out, "torch.onnx"))


if __name__ == "__main__":
    main()
