#!/usr/bin/env python3
"""Writes the MobileNet and EfficientNet model YAMLs in this directory (python3, standard library only).

    python3 models/generate_mobilenets.py       # rewrites models/{mobilenet_v2,mobilenet_v3_small,efficientnet_b0}.yaml
    python3 models/generate_mobilenets.py DIR   # writes them into DIR instead (the tests compare)

mobilenet_v2 follows torchvision's `torchvision.models.mobilenet_v2` (width 1.0) exactly: a 3x3
stride-2 stem, 17 inverted residual blocks (1x1 expansion, 3x3 depthwise, 1x1 linear projection,
batch norm after each, ReLU6 after the first two, the input added where the shape stays), a 1x1
convolution to 1280 channels, global average pooling, dropout 0.2 and the classifier. Layers with
weights carry torchvision's module names (features.2.conv.1.0, classifier.1), so Convoy's
state-dict names are torchvision's state_dict keys.

mobilenet_v3_small and efficientnet_b0 follow torchvision's `mobilenet_v3_small` and
`efficientnet_b0` exactly in the same way. Their blocks add squeeze-and-excitation
(torchvision.ops.SqueezeExcitation: global average pooling, a 1x1 convolution with bias to the
squeeze channels, ReLU or SiLU, a 1x1 convolution with bias back, hardsigmoid or sigmoid, and the
block's activations multiplied per channel by the result: a `mul` layer). MobileNetV3's batch norms
are torchvision's (eps 0.001, momentum 0.01). EfficientNet's stochastic depth is the identity
outside training and is left out (Convoy's models have no stochastic depth).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generate_resnets import HERE, Writer  # noqa: E402


class MobileWriter(Writer):
    def conv_dw(self, name, kernel, stride, padding):
        c, h, w = self.shapes[self.last]
        ho = (h + 2 * padding - kernel) // stride + 1
        wo = (w + 2 * padding - kernel) // stride + 1
        self.params += c * kernel * kernel
        self.macs += c * ho * wo * kernel * kernel
        fields = {"name": name, "type": "conv2d", "out_channels": c, "kernel": kernel}
        if stride != 1:
            fields["stride"] = stride
        if padding:
            fields["padding"] = padding
        fields["groups"] = c
        fields["bias"] = "false"
        return self._emit(fields, None, (c, ho, wo))

    def act(self, name, kind):
        return self._emit({"name": name, "type": kind}, None, self.shapes[self.last])

    def dropout(self, name, p):
        return self._emit({"name": name, "type": "dropout", "p": p}, None, self.shapes[self.last])

    def conv_bias(self, name, out_ch):
        """A 1x1 convolution with bias (squeeze-and-excitation's fc1 and fc2)."""
        c, h, w = self.shapes[self.last]
        self.params += out_ch * c + out_ch
        self.macs += out_ch * c * h * w
        return self._emit({"name": name, "type": "conv2d", "out_channels": out_ch, "kernel": 1}, None, (out_ch, h, w))

    def bn_with(self, name, eps, momentum):
        self.params += 2 * self.shapes[self.last][0]
        fields = {"name": name, "type": "batchnorm2d", "eps": eps, "momentum": momentum}
        return self._emit(fields, None, self.shapes[self.last])

    def mul(self, name, x, s):
        c, h, w = self.shapes[x]
        assert self.shapes[s] == (c, 1, 1), (name, self.shapes[x], self.shapes[s])
        return self._emit({"name": name, "type": "mul"}, [x, s], (c, h, w))


def conv_bn_act(wr, prefix, out_ch, kernel, stride, depthwise=False):
    """torchvision's Conv2dNormActivation: conv (no bias) -> BN -> ReLU6, as prefix.0/1/2."""
    padding = (kernel - 1) // 2
    if depthwise:
        wr.conv_dw(f"{prefix}.0", kernel, stride, padding)
    else:
        wr.conv(f"{prefix}.0", out_ch, kernel, stride, padding)
    wr.bn(f"{prefix}.1")
    return wr.act(f"{prefix}.2", "relu6")


def inverted_residual(wr, prefix, out_ch, stride, expand):
    block_in = wr.last
    in_ch = wr.shapes[block_in][0]
    hidden = in_ch * expand
    k = 0
    if expand != 1:
        conv_bn_act(wr, f"{prefix}.conv.{k}", hidden, 1, 1)
        k += 1
    conv_bn_act(wr, f"{prefix}.conv.{k}", hidden, 3, stride, depthwise=True)
    wr.conv(f"{prefix}.conv.{k + 1}", out_ch, 1)
    main = wr.bn(f"{prefix}.conv.{k + 2}")
    if stride == 1 and in_ch == out_ch:
        wr.add(f"{prefix}.add", main, block_in)


def make_divisible(v, divisor=8):
    """torchvision's _make_divisible: the nearest multiple of divisor, never 10% below v."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def conv_norm_act(wr, prefix, out_ch, kernel, stride, act, depthwise=False, bn=None):
    """torchvision's Conv2dNormActivation: conv (no bias) -> BN -> act (none: no .2)."""
    padding = (kernel - 1) // 2
    if depthwise:
        wr.conv_dw(f"{prefix}.0", kernel, stride, padding)
    else:
        wr.conv(f"{prefix}.0", out_ch, kernel, stride, padding)
    if bn:
        wr.bn_with(f"{prefix}.1", *bn)
    else:
        wr.bn(f"{prefix}.1")
    return wr.act(f"{prefix}.2", act) if act else wr.last


def squeeze_excitation(wr, prefix, squeeze, act, scale_act):
    """torchvision.ops.SqueezeExcitation: the block's input times scale_act(fc2(act(fc1(avgpool(x)))))."""
    x = wr.last
    wr.gap(f"{prefix}.avgpool")
    wr.conv_bias(f"{prefix}.fc1", squeeze)
    wr.act(f"{prefix}.activation", act)
    wr.conv_bias(f"{prefix}.fc2", wr.shapes[x][0])
    scale = wr.act(f"{prefix}.scale_activation", scale_act)
    return wr.mul(f"{prefix}.mul", x, scale)


V3_BN = (0.001, 0.01)  # MobileNetV3's batch norm: eps, momentum


def v3_block(wr, prefix, kernel, expanded, out_ch, use_se, act, stride):
    """torchvision's MobileNetV3 InvertedResidual: [1x1 expansion] -> depthwise -> [SE] -> 1x1 projection."""
    block_in = wr.last
    in_ch = wr.shapes[block_in][0]
    k = 0
    if expanded != in_ch:
        conv_norm_act(wr, f"{prefix}.block.{k}", expanded, 1, 1, act, bn=V3_BN)
        k += 1
    conv_norm_act(wr, f"{prefix}.block.{k}", expanded, kernel, stride, act, depthwise=True, bn=V3_BN)
    k += 1
    if use_se:
        squeeze_excitation(wr, f"{prefix}.block.{k}", make_divisible(expanded // 4), "relu", "hardsigmoid")
        k += 1
    main = conv_norm_act(wr, f"{prefix}.block.{k}", out_ch, 1, 1, None, bn=V3_BN)
    if stride == 1 and in_ch == out_ch:
        wr.add(f"{prefix}.add", main, block_in)


def mobilenet_v3_small(classes=1000):
    wr = MobileWriter((3, 224, 224))
    wr.comment("stem")
    conv_norm_act(wr, "features.0", 16, 3, 2, "hardswish", bn=V3_BN)
    # torchvision's bneck_conf: input, kernel, expanded, out, SE, activation, stride
    setting = ((16, 3, 16, 16, True, "relu", 2), (16, 3, 72, 24, False, "relu", 2), (24, 3, 88, 24, False, "relu", 1),
               (24, 5, 96, 40, True, "hardswish", 2), (40, 5, 240, 40, True, "hardswish", 1),
               (40, 5, 240, 40, True, "hardswish", 1), (40, 5, 120, 48, True, "hardswish", 1),
               (48, 5, 144, 48, True, "hardswish", 1), (48, 5, 288, 96, True, "hardswish", 2),
               (96, 5, 576, 96, True, "hardswish", 1), (96, 5, 576, 96, True, "hardswish", 1))
    for i, (_, kernel, expanded, out_ch, use_se, act, stride) in enumerate(setting, start=1):
        wr.blank()
        se = ", squeeze-and-excitation" if use_se else ""
        wr.comment(f"block {i}: {kernel}x{kernel} depthwise, expanded {expanded}, {out_ch} channels, {act}{se}")
        v3_block(wr, f"features.{i}", kernel, expanded, out_ch, use_se, act, stride)
    wr.blank()
    wr.comment("head")
    conv_norm_act(wr, "features.12", 576, 1, 1, "hardswish", bn=V3_BN)
    wr.gap("avgpool")
    wr.flatten("flatten")
    wr.fc("classifier.0", 1024)
    wr.act("classifier.1", "hardswish")
    wr.dropout("classifier.2", 0.2)
    wr.fc("classifier.3", classes)
    return wr


def mbconv(wr, prefix, expand, kernel, stride, out_ch):
    """torchvision's EfficientNet MBConv: [1x1 expansion] -> depthwise -> SE -> 1x1 projection, SiLU."""
    block_in = wr.last
    in_ch = wr.shapes[block_in][0]
    expanded = make_divisible(in_ch * expand)
    k = 0
    if expanded != in_ch:
        conv_norm_act(wr, f"{prefix}.block.{k}", expanded, 1, 1, "silu")
        k += 1
    conv_norm_act(wr, f"{prefix}.block.{k}", expanded, kernel, stride, "silu", depthwise=True)
    squeeze_excitation(wr, f"{prefix}.block.{k + 1}", max(1, in_ch // 4), "silu", "sigmoid")
    main = conv_norm_act(wr, f"{prefix}.block.{k + 2}", out_ch, 1, 1, None)
    if stride == 1 and in_ch == out_ch:  # stochastic depth before the add: the identity in evaluation
        wr.add(f"{prefix}.add", main, block_in)


def efficientnet_b0(classes=1000):
    wr = MobileWriter((3, 224, 224))
    wr.comment("stem")
    conv_norm_act(wr, "features.0", 32, 3, 2, "silu")
    # torchvision's MBConvConfig: expansion, kernel, stride, out channels, blocks
    for stage, (expand, kernel, stride, out_ch, n) in enumerate(
            ((1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3), (6, 5, 1, 112, 3),
             (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)), start=1):
        for j in range(n):
            wr.blank()
            if j == 0:
                wr.comment(f"stage {stage}: {n} MBConv block{'s' if n > 1 else ''}, expansion {expand}, "
                           f"{kernel}x{kernel} depthwise, {out_ch} channels")
            mbconv(wr, f"features.{stage}.{j}", expand, kernel, stride if j == 0 else 1, out_ch)
    wr.blank()
    wr.comment("head")
    conv_norm_act(wr, "features.8", 1280, 1, 1, "silu")
    wr.gap("avgpool")
    wr.flatten("flatten")
    wr.dropout("classifier.0", 0.2)
    wr.fc("classifier.1", classes)
    return wr


def mobilenet_v2(classes=1000):
    wr = MobileWriter((3, 224, 224))
    wr.comment("stem")
    conv_bn_act(wr, "features.0", 32, 3, 2)
    index = 1
    for expand, channels, n, stride in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                                        (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            wr.blank()
            if i == 0:
                wr.comment(f"{n} inverted residual block{'s' if n > 1 else ''}: expansion {expand}, {channels} channels")
            inverted_residual(wr, f"features.{index}", channels, stride if i == 0 else 1, expand)
            index += 1
    wr.blank()
    wr.comment("head")
    conv_bn_act(wr, f"features.{index}", 1280, 1, 1)
    wr.gap("avgpool")
    wr.flatten("flatten")
    wr.dropout("classifier.0", 0.2)
    wr.fc("classifier.1", classes)
    return wr


def write(name, wr, description, classes, out_dir=HERE):
    c, h, w = wr.shapes["input"]
    header = [f"# {name}: {line}" if i == 0 else f"# {line}" for i, line in enumerate(description)]
    header += [
        f"# Parameters: {wr.params:,} (trainable; batch-norm running statistics not counted).",
        f"# Forward cost per {h}x{w} image: {wr.macs / 1e9:.3f} G multiply-adds in the convolutions and classifier",
        f"# ({2 * wr.macs / 1e9:.3f} GFLOPs at 2 per multiply-add; `convoy info` adds batch norm, activations, add, pooling).",
        "# Generated by generate_mobilenets.py; edit the script, not this file.",
        "# Output shape per sample on the right.",
    ]
    text = "\n".join(header) + "\n"
    text += f"name: {name}\ninput: [{c}, {h}, {w}]\nclasses: {classes}\nlayers:\n"
    text += "\n".join(line.rstrip() for line in wr.lines) + "\n"
    with open(os.path.join(out_dir, name + ".yaml"), "w") as f:
        f.write(text)
    print(f"{name}: {wr.params:,} parameters, {wr.macs / 1e9:.3f} GMACs")


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else HERE
    write("mobilenet_v2", mobilenet_v2(),
          ["torchvision's mobilenet_v2 (Sandler et al. 2018, width 1.0), exactly: same layers, same",
           "parameter count. Inverted residual blocks: 1x1 expansion (x6) -> BN -> ReLU6 -> 3x3 depthwise",
           "-> BN -> ReLU6 -> 1x1 linear projection -> BN, + the input where the shape stays.",
           "Layer names are torchvision's module names (features.2.conv.1.0), so state-dict names are its keys."],
          1000, out_dir)
    write("mobilenet_v3_small", mobilenet_v3_small(),
          ["torchvision's mobilenet_v3_small (Howard et al. 2019), exactly: same layers, same parameter",
           "count. Blocks: [1x1 expansion -> BN -> act] -> depthwise -> BN -> act -> [squeeze-and-excitation:",
           "pool, 1x1 + ReLU, 1x1 + hardsigmoid, times the block] -> 1x1 projection -> BN, + the input where the",
           "shape stays; act ReLU or hardswish. Layer names are torchvision's module names."],
          1000, out_dir)
    write("efficientnet_b0", efficientnet_b0(),
          ["torchvision's efficientnet_b0 (Tan and Le 2019), exactly: same layers, same parameter count.",
           "MBConv blocks: [1x1 expansion (x6) -> BN -> SiLU] -> depthwise -> BN -> SiLU -> squeeze-and-",
           "excitation (pool, 1x1 + SiLU, 1x1 + sigmoid, times the block) -> 1x1 projection -> BN, + the input",
           "where the shape stays (stochastic depth is the identity outside training: left out).",
           "Layer names are torchvision's module names (features.2.0.block.2.fc1)."],
          1000, out_dir)


if __name__ == "__main__":
    main()
