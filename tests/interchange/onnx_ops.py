#!/usr/bin/env python3
"""Small ONNX files for the import tests, built with Debian's python3-onnx (onnx.helper).

    onnx_ops.py OUT_DIR        # writes OUT_DIR/<case>.onnx for each case below, prints their names
    onnx_ops.py check FILE     # onnx.checker (full) on an exported file; prints opset, input dims, metadata keys

Each case is input (batch, 4, 6, 6) -> the op(s) under test -> Flatten -> output, with seeded
random weights; the test runs it in ONNX Runtime and in Convoy after `convoy import` and compares.
The activations of the mobile networks come after a 1x1 convolution that spreads the values over
about -15 ... 15, past every kink (hardsigmoid's and hardswish's -3 and 3, relu6's 6).
`unsupported` holds a Tanh node, which the import must refuse, naming the node and the op; the
`refused_*` files hold what Convoy's layers cannot honour, each refused with its reason.
Exit status 3: onnx is missing.
"""
import json
import os
import sys

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    sys.exit(3)

RNG = np.random.default_rng(7)


def weight(name, *shape, low=-0.5, high=0.5):
    return numpy_helper.from_array(RNG.uniform(low, high, shape).astype(np.float32), name)


def model(name, nodes, inits):
    nodes = nodes + [helper.make_node("Flatten", ["y"], ["out"], name="flatten", axis=1)]
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 4, 6, 6])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", None])],
        inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20 if name == "gelu" else 17)],
                          producer_name="onnx_ops.py")
    m.ir_version = 9 if name == "gelu" else 8
    if name != "gelu":  # Gelu is opset 20, newer than Debian's onnx 1.12 checker knows
        onnx.checker.check_model(m, full_check=True)
    return m


def cases():
    n = helper.make_node
    bn = [weight("s", 4, low=0.5, high=1.5), weight("b", 4), weight("m", 4), weight("v", 4, low=0.5, high=2.0)]
    yield "conv", [n("Conv", ["input", "w", "cb"], ["y"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                     strides=[2, 2], dilations=[1, 1], group=2)], [weight("w", 6, 2, 3, 3), weight("cb", 6)]
    yield "conv_dilated", [n("Conv", ["input", "w"], ["y"], name="conv", pads=[2, 2, 2, 2], dilations=[2, 2])], \
        [weight("w", 3, 4, 3, 3)]
    yield "batchnorm", [n("BatchNormalization", ["input", "s", "b", "m", "v"], ["y"], name="bn", epsilon=1e-3)], bn
    yield "relu", [n("Relu", ["input"], ["y"], name="relu")], []
    yield "leaky_relu", [n("LeakyRelu", ["input"], ["y"], name="lrelu", alpha=0.2)], []
    yield "gelu", [n("Gelu", ["input"], ["y"], name="gelu")], []
    yield "maxpool", [n("MaxPool", ["input"], ["y"], name="pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])], []
    yield "avgpool", [n("AveragePool", ["input"], ["y"], name="pool", kernel_shape=[2, 2], strides=[2, 2])], []
    yield "global_avg_pool", [n("GlobalAveragePool", ["input"], ["y"], name="gap")], []
    yield "global_max_pool", [n("GlobalMaxPool", ["input"], ["y"], name="gmp")], []
    yield "gemm", [n("Flatten", ["input"], ["f"], name="f", axis=1),
                   n("Gemm", ["f", "w", "c"], ["y"], name="fc", transB=1)], [weight("w", 5, 144), weight("c", 5)]
    yield "matmul_add", [n("Flatten", ["input"], ["f"], name="f", axis=1), n("MatMul", ["f", "w"], ["mm"], name="fc"),
                         n("Add", ["mm", "c"], ["y"], name="bias")], [weight("w", 144, 5), weight("c", 5)]
    yield "add", [n("Relu", ["input"], ["r"], name="relu"), n("Add", ["r", "input"], ["y"], name="add")], []
    yield "concat", [n("Relu", ["input"], ["r"], name="relu"), n("Concat", ["input", "r"], ["y"], name="cat", axis=1)], []
    yield "dropout_identity", [n("Dropout", ["input"], ["d"], name="drop"), n("Identity", ["d"], ["y"], name="id")], []
    spread = [n("Conv", ["input", "sw"], ["x"], name="spread")]
    sw = weight("sw", 4, 4, 1, 1, low=-4.0, high=4.0)
    i64 = lambda name, values: numpy_helper.from_array(np.array(values, dtype=np.int64), name)
    f32 = lambda name, value: numpy_helper.from_array(np.array(value, dtype=np.float32), name)
    yield "sigmoid", spread + [n("Sigmoid", ["x"], ["y"], name="sig")], [sw]
    yield "silu", spread + [n("Sigmoid", ["x"], ["s"], name="/act/Sigmoid"), n("Mul", ["x", "s"], ["y"], name="/act/Mul")], [sw]
    yield "hardsigmoid", spread + [n("HardSigmoid", ["x"], ["y"], name="hsig", alpha=1.0 / 6)], [sw]
    yield "hardswish", spread + [n("HardSwish", ["x"], ["y"], name="hsw")], [sw]
    yield "relu6", spread + [n("Clip", ["x", "lo", "hi"], ["y"], name="clip")], [sw, f32("lo", 0.0), f32("hi", 6.0)]
    yield "clip_relu", spread + [n("Clip", ["x", "lo"], ["y"], name="clip")], [sw, f32("lo", 0.0)]
    yield "reduce_mean", [n("ReduceMean", ["input"], ["y"], name="mean", axes=[2, 3], keepdims=1)], []
    yield "reduce_mean_flat", [n("ReduceMean", ["input"], ["y"], name="mean", axes=[-1, -2], keepdims=0)], []
    # torch.onnx's nn.AvgPool2d(2): a Pad of zeros before the AveragePool.
    yield "pad_avgpool", [n("Pad", ["input", "pads"], ["p"], name="pad", mode="constant"),
                          n("AveragePool", ["p"], ["y"], name="pool", kernel_shape=[2, 2], strides=[2, 2])], \
        [i64("pads", [0] * 8)]
    # torch.onnx's x.view(x.size(0), -1).
    yield "view_flatten", [n("Relu", ["input"], ["r"], name="relu"), n("Shape", ["r"], ["shape"], name="shape"),
                           n("Gather", ["shape", "zero"], ["batch"], name="gather", axis=0),
                           n("Unsqueeze", ["batch", "axis0"], ["batch1"], name="unsqueeze"),
                           n("Concat", ["batch1", "minus1"], ["target"], name="concat", axis=0),
                           n("Reshape", ["r", "target"], ["y"], name="reshape")], \
        [i64("zero", 0), i64("axis0", [0]), i64("minus1", [-1])]
    # torchvision's SqueezeExcitation as torch.onnx writes it: the block's x times a per-channel scale.
    yield "se_mul", spread + [n("GlobalAveragePool", ["x"], ["g"], name="avgpool"),
                              n("Conv", ["g", "w1", "b1"], ["f1"], name="fc1"), n("Relu", ["f1"], ["a"], name="act"),
                              n("Conv", ["a", "w2", "b2"], ["f2"], name="fc2"),
                              n("HardSigmoid", ["f2"], ["s"], name="scale_act", alpha=1.0 / 6),
                              n("Mul", ["s", "x"], ["y"], name="se")], \
        [sw, weight("w1", 2, 4, 1, 1), weight("b1", 2), weight("w2", 4, 2, 1, 1), weight("b2", 4)]
    # 6x6, kernel 2, stride 2: ceil_mode adds no window.
    yield "maxpool_ceil", [n("MaxPool", ["input"], ["y"], name="pool", kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)], []
    yield "unsupported", [n("Tanh", ["input"], ["y"], name="squash")], []
    # 6x6, kernel 3, stride 2: ceil_mode adds a third window per row, floor has two.
    yield "refused_ceil", [n("MaxPool", ["input"], ["y"], name="pool", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)], []
    yield "refused_clip", [n("Clip", ["input", "lo", "hi"], ["y"], name="clip")], [f32("lo", -1.0), f32("hi", 1.0)]
    yield "refused_hardsigmoid", [n("HardSigmoid", ["input"], ["y"], name="hsig")], []  # ONNX's alpha 0.2
    yield "refused_pad", [n("Pad", ["input", "pads"], ["p"], name="pad", mode="constant"),
                          n("AveragePool", ["p"], ["y"], name="pool", kernel_shape=[2, 2], strides=[2, 2])], \
        [i64("pads", [0, 0, 1, 1, 0, 0, 1, 1])]
    yield "refused_mul", [n("Mul", ["input", "k"], ["y"], name="scale")], [f32("k", 2.0)]
    yield "refused_reduce_mean", [n("ReduceMean", ["input"], ["y"], name="mean", axes=[1], keepdims=1)], []


def check(path):
    m = onnx.load(path)
    onnx.checker.check_model(m, full_check=True)
    dims = [d.dim_param or d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    print(json.dumps({"opset": [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")],
                      "input": dims, "metadata": sorted(p.key for p in m.metadata_props),
                      "ops": sorted({nd.op_type for nd in m.graph.node})}))


def main():
    if sys.argv[1] == "check":
        return check(sys.argv[2])
    for name, nodes, inits in cases():
        onnx.save(model(name, nodes, inits), os.path.join(sys.argv[1], name + ".onnx"))
        print(name)


if __name__ == "__main__":
    main()
