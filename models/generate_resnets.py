#!/usr/bin/env python3
"""Writes the ResNet model YAMLs in this directory (python3, standard library only).

    python3 models/generate_resnets.py          # rewrites models/resnet{18,34,50,20,56}.yaml

ImageNet ResNets (resnet18, resnet34, resnet50) follow torchvision's `torchvision.models.resnetNN`
exactly: convolutions without bias, batch norm with affine, fc with bias, downsample = 1x1 conv
with stride s + BN on the first block of a stage whose shape changes, and for Bottleneck the
stride on the 3x3 conv ("ResNet v1.5"). Layers with weights carry torchvision's module names
(conv1, bn1, layer1.0.conv1, layer1.0.downsample.0, fc), so Convoy's state-dict names are
torchvision's state_dict keys (`layer1.0.downsample.0.weight`, `bn1.running_var`) and
`convoy train --init-weights` loads a torchvision state dict as it is. Convoy keeps no
`num_batches_tracked` (its batch norm has a fixed momentum); the loader skips those.
Layers without weights (ReLUs, the residual adds) get names in the same style
(layer1.0.relu1, layer1.0.add).

CIFAR ResNets (resnet20, resnet56) are those of He et al. 2016 (section 4.2), with the option B
shortcut (1x1 conv + BN where the shape changes, identity elsewhere).

The script computes each model's parameter count and forward cost while it writes the layers
and puts them in the file's header; tests/test_resnets.cpp checks them against Convoy's own.
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))


class Writer:
    """Collects layer lines and tracks the per-sample shape, parameters and multiply-adds."""

    def __init__(self, in_shape):
        self.lines = []
        self.shapes = {"input": tuple(in_shape)}
        self.last = "input"
        self.params = 0
        self.macs = 0

    def blank(self):
        if self.lines and self.lines[-1] != "":
            self.lines.append("")

    def comment(self, text):
        self.lines.append("  # " + text)

    def _emit(self, fields, inputs, shape, note=""):
        name = fields["name"]
        if inputs is not None and list(inputs) != [self.last]:
            fields["inputs"] = "[" + ", ".join(inputs) + "]"
        body = ", ".join(f"{k}: {v}" for k, v in fields.items())
        line = "  - {" + body + "}"
        shape_text = "x".join(str(d) for d in shape)
        tail = shape_text + ("  " + note if note else "")
        self.lines.append(f"{line:<100} # {tail}" if len(line) < 100 else f"{line}  # {tail}")
        self.shapes[name] = shape
        self.last = name
        return name

    def conv(self, name, out_ch, kernel, stride=1, padding=0, src=None):
        src = src or self.last
        c, h, w = self.shapes[src]
        ho = (h + 2 * padding - kernel) // stride + 1
        wo = (w + 2 * padding - kernel) // stride + 1
        self.params += out_ch * c * kernel * kernel
        self.macs += out_ch * ho * wo * c * kernel * kernel
        fields = {"name": name, "type": "conv2d", "out_channels": out_ch, "kernel": kernel}
        if stride != 1:
            fields["stride"] = stride
        if padding:
            fields["padding"] = padding
        fields["bias"] = "false"
        return self._emit(fields, [src], (out_ch, ho, wo))

    def bn(self, name):
        self.params += 2 * self.shapes[self.last][0]
        return self._emit({"name": name, "type": "batchnorm2d"}, None, self.shapes[self.last])

    def relu(self, name):
        return self._emit({"name": name, "type": "relu"}, None, self.shapes[self.last])

    def maxpool(self, name, kernel, stride, padding):
        c, h, w = self.shapes[self.last]
        ho = (h + 2 * padding - kernel) // stride + 1
        wo = (w + 2 * padding - kernel) // stride + 1
        fields = {"name": name, "type": "maxpool2d", "kernel": kernel, "stride": stride, "padding": padding}
        return self._emit(fields, None, (c, ho, wo))

    def add(self, name, a, b):
        assert self.shapes[a] == self.shapes[b], (name, self.shapes[a], self.shapes[b])
        return self._emit({"name": name, "type": "add"}, [a, b], self.shapes[a])

    def gap(self, name):
        c = self.shapes[self.last][0]
        return self._emit({"name": name, "type": "global_avg_pool"}, None, (c, 1, 1))

    def flatten(self, name):
        c, h, w = self.shapes[self.last]
        return self._emit({"name": name, "type": "flatten"}, None, (c * h * w,))

    def fc(self, name, out_features):
        (f,) = self.shapes[self.last]
        self.params += f * out_features + out_features
        self.macs += f * out_features
        return self._emit({"name": name, "type": "linear", "out_features": out_features}, None, (out_features,))


def basic_block(wr, prefix, planes, stride):
    """torchvision's BasicBlock: 3x3 (stride s) -> BN -> ReLU -> 3x3 -> BN, + shortcut, ReLU."""
    block_in = wr.last
    in_ch = wr.shapes[block_in][0]
    wr.conv(f"{prefix}.conv1", planes, 3, stride, 1)
    wr.bn(f"{prefix}.bn1")
    wr.relu(f"{prefix}.relu1")
    wr.conv(f"{prefix}.conv2", planes, 3, 1, 1)
    main = wr.bn(f"{prefix}.bn2")
    shortcut = block_in
    if stride != 1 or in_ch != planes:
        wr.conv(f"{prefix}.downsample.0", planes, 1, stride, 0, src=block_in)
        shortcut = wr.bn(f"{prefix}.downsample.1")
    wr.add(f"{prefix}.add", main, shortcut)
    wr.relu(f"{prefix}.relu")


def bottleneck(wr, prefix, planes, stride):
    """torchvision's Bottleneck (v1.5): 1x1 -> 3x3 (stride s) -> 1x1 (4x planes), BN and ReLU
    after each, the last ReLU after the sum with the shortcut."""
    block_in = wr.last
    in_ch = wr.shapes[block_in][0]
    out_ch = planes * 4
    wr.conv(f"{prefix}.conv1", planes, 1)
    wr.bn(f"{prefix}.bn1")
    wr.relu(f"{prefix}.relu1")
    wr.conv(f"{prefix}.conv2", planes, 3, stride, 1)
    wr.bn(f"{prefix}.bn2")
    wr.relu(f"{prefix}.relu2")
    wr.conv(f"{prefix}.conv3", out_ch, 1)
    main = wr.bn(f"{prefix}.bn3")
    shortcut = block_in
    if stride != 1 or in_ch != out_ch:
        wr.conv(f"{prefix}.downsample.0", out_ch, 1, stride, 0, src=block_in)
        shortcut = wr.bn(f"{prefix}.downsample.1")
    wr.add(f"{prefix}.add", main, shortcut)
    wr.relu(f"{prefix}.relu")


def imagenet_resnet(block, blocks_per_stage):
    wr = Writer((3, 224, 224))
    wr.comment("stem")
    wr.conv("conv1", 64, 7, 2, 3)
    wr.bn("bn1")
    wr.relu("relu")
    wr.maxpool("maxpool", 3, 2, 1)
    for stage, (planes, n) in enumerate(zip((64, 128, 256, 512), blocks_per_stage), start=1):
        for i in range(n):
            wr.blank()
            if i == 0:
                wr.comment(f"layer{stage}: {n} blocks of {planes} planes")
            stride = 2 if stage > 1 and i == 0 else 1
            block(wr, f"layer{stage}.{i}", planes, stride)
    wr.blank()
    wr.comment("head")
    wr.gap("avgpool")
    wr.flatten("flatten")
    wr.fc("fc", 1000)
    return wr


def cifar_resnet(n):
    wr = Writer((3, 32, 32))
    wr.comment("stem")
    wr.conv("conv1", 16, 3, 1, 1)
    wr.bn("bn1")
    wr.relu("relu")
    for stage, planes in enumerate((16, 32, 64), start=1):
        for i in range(n):
            wr.blank()
            if i == 0:
                wr.comment(f"layer{stage}: {n} blocks of {planes} planes")
            stride = 2 if stage > 1 and i == 0 else 1
            basic_block(wr, f"layer{stage}.{i}", planes, stride)
    wr.blank()
    wr.comment("head")
    wr.gap("avgpool")
    wr.flatten("flatten")
    wr.fc("fc", 10)
    return wr


def write(name, wr, description, classes):
    c, h, w = wr.shapes["input"]
    header = [f"# {name}: {line}" if i == 0 else f"# {line}" for i, line in enumerate(description)]
    header += [
        f"# Parameters: {wr.params:,} (trainable; batch-norm running statistics not counted).",
        f"# Forward cost per {h}x{w} image: {wr.macs / 1e9:.3f} G multiply-adds in the convolutions and fc",
        f"# ({2 * wr.macs / 1e9:.3f} GFLOPs at 2 per multiply-add; `convoy info` adds batch norm, ReLU, add, pooling).",
        "# Generated by generate_resnets.py; edit the script, not this file.",
        "# Output shape per sample on the right.",
    ]
    text = "\n".join(header) + "\n"
    text += f"name: {name}\ninput: [{c}, {h}, {w}]\nclasses: {classes}\nlayers:\n"
    text += "\n".join(line.rstrip() for line in wr.lines) + "\n"
    with open(os.path.join(HERE, name + ".yaml"), "w") as f:
        f.write(text)
    print(f"{name}: {wr.params:,} parameters, {wr.macs / 1e9:.3f} GMACs")


TORCHVISION = "torchvision's resnet{0} (He et al. 2015), exactly: same layers, same parameter count."


def main():
    write("resnet18", imagenet_resnet(basic_block, (2, 2, 2, 2)),
          [TORCHVISION.format(18),
           "BasicBlock x [2, 2, 2, 2]; 1x1 conv + BN downsample on the first block of layer2-4.",
           "Layer names are torchvision's module names (layer1.0.conv1), so state-dict names are its keys."],
          1000)
    write("resnet34", imagenet_resnet(basic_block, (3, 4, 6, 3)),
          [TORCHVISION.format(34),
           "BasicBlock x [3, 4, 6, 3]; 1x1 conv + BN downsample on the first block of layer2-4.",
           "Layer names are torchvision's module names (layer1.0.conv1), so state-dict names are its keys."],
          1000)
    write("resnet50", imagenet_resnet(bottleneck, (3, 4, 6, 3)),
          [TORCHVISION.format(50),
           "Bottleneck x [3, 4, 6, 3], v1.5: the stride is on the 3x3 conv, not the first 1x1;",
           "1x1 conv + BN downsample on the first block of every stage (layer1's for 64 -> 256 channels).",
           "Layer names are torchvision's module names (layer1.0.conv1), so state-dict names are its keys."],
          1000)
    write("resnet20", cifar_resnet(3),
          ["the CIFAR-10 ResNet-20 of He et al. 2016 (section 4.2), n = 3 (6n + 2 = 20 layers).",
           "3x3 conv 16, three stages of 3 basic blocks with 16/32/64 channels (32x32, 16x16, 8x8),",
           "global average pool, fc 10. Shortcuts: option B, a 1x1 conv (stride 2) + BN where the",
           "shape changes (first blocks of layer2 and layer3), identity elsewhere. The paper's 0.27M",
           "is for option A (zero-padding identity, 269,722 parameters); option B adds 2,752."],
          10)
    write("resnet56", cifar_resnet(9),
          ["the CIFAR-10 ResNet-56 of He et al. 2016 (section 4.2), n = 9 (6n + 2 = 56 layers).",
           "3x3 conv 16, three stages of 9 basic blocks with 16/32/64 channels (32x32, 16x16, 8x8),",
           "global average pool, fc 10. Shortcuts: option B, a 1x1 conv (stride 2) + BN where the",
           "shape changes (first blocks of layer2 and layer3), identity elsewhere. The paper's 0.85M",
           "is for option A (zero-padding identity, 853,018 parameters); option B adds 2,752."],
          10)


if __name__ == "__main__":
    main()
