#!/usr/bin/env python3
"""Small ONNX files for the import tests, built with Debian's python3-onnx (onnx.helper).

    onnx_ops.py OUT_DIR        # writes OUT_DIR/<case>.onnx for each case below, prints their names
    onnx_ops.py check FILE     # onnx.checker (full) on an exported file; prints opset, input dims, metadata keys

Each case is input (batch, 4, 6, 6) -> the op(s) under test -> Flatten -> output, with seeded
random weights; the test runs it in ONNX Runtime and in Convoy after `convoy import` and compares.
`unsupported` holds a Sigmoid node, which the import must refuse, naming the node and the op.
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
    yield "unsupported", [n("Sigmoid", ["input"], ["y"], name="squash")], []


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
