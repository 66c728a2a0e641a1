#!/usr/bin/env python3
"""Small ONNX files of Resize and Softmax for the import tests (Debian's python3-onnx, onnx.helper).

    onnx_resize_ops.py OUT_DIR    # writes OUT_DIR/<case>.onnx for each case below, prints their names

Each case is input (batch, 4, 6, 6) -> a 1x1 convolution -> the op(s) under test -> Flatten -> out.
`resize_*` and `softmax_*` import and agree with ONNX Runtime; `refused_*` hold what Convoy's
layers cannot honour, each refused with its reason. Exit status 3: onnx is missing.
"""
import os
import sys

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    sys.exit(3)

RNG = np.random.default_rng(11)


def model(name, nodes, inits, opset=17):
    nodes = [helper.make_node("Conv", ["input", "w"], ["x"], name="conv")] + nodes + \
        [helper.make_node("Flatten", ["y"], ["out"], name="flatten", axis=1)]
    inits = inits + [numpy_helper.from_array(RNG.uniform(-1, 1, (4, 4, 1, 1)).astype(np.float32), "w")]
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 4, 6, 6])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", None])],
        inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="onnx_resize_ops.py")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def cases():
    n = helper.make_node
    i64 = lambda name, values: numpy_helper.from_array(np.array(values, dtype=np.int64), name)
    f32 = lambda name, values: numpy_helper.from_array(np.array(values, dtype=np.float32), name)
    nearest = dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    linear = dict(mode="linear", coordinate_transformation_mode="half_pixel")
    yield "resize_nearest_scales", [n("Resize", ["x", "", "s"], ["y"], name="up", **nearest)], [f32("s", [1, 1, 2, 3])]
    yield "resize_linear_scales", [n("Resize", ["x", "", "s"], ["y"], name="up", **linear)], [f32("s", [1, 1, 2, 2])]
    # F.interpolate(x, size=(9, 4)) as torch.onnx writes it: (N, C) of Shape(x), then the size.
    yield "resize_linear_sizes", [n("Shape", ["x"], ["shape"], name="shape"),
                                  n("Slice", ["shape", "zero", "two", "zero"], ["nc"], name="slice"),
                                  n("Concat", ["nc", "hw"], ["sizes"], name="concat", axis=0),
                                  n("Resize", ["x", "", "", "sizes"], ["y"], name="up", **linear)], \
        [i64("zero", [0]), i64("two", [2]), i64("hw", [9, 4])]
    yield "softmax_channels", [n("Softmax", ["x"], ["y"], name="sm", axis=1)], []
    yield "softmax_last_of_features", [n("Flatten", ["x"], ["f"], name="f", axis=1),
                                       n("Softmax", ["f"], ["y"], name="sm", axis=-1)], []
    yield "refused_cubic", [n("Resize", ["x", "", "s"], ["y"], name="up", mode="cubic")], [f32("s", [1, 1, 2, 2])]
    yield "refused_align_corners", [n("Resize", ["x", "", "s"], ["y"], name="up", mode="linear",
                                      coordinate_transformation_mode="align_corners")], [f32("s", [1, 1, 2, 2])]
    yield "refused_fraction", [n("Resize", ["x", "", "s"], ["y"], name="up", **linear)], [f32("s", [1, 1, 1.5, 1.5])]
    yield "refused_nearest_half_pixel", [n("Resize", ["x", "", "s"], ["y"], name="up", mode="nearest")], \
        [f32("s", [1, 1, 2, 2])]
    # Constant sizes whose channels are not the input's (8, not 4): resizing cannot change them.
    yield "refused_sizes_channels", [n("Resize", ["x", "", "", "sizes"], ["y"], name="up", **linear)], \
        [i64("sizes", [1, 8, 12, 12])]
    yield "refused_softmax_axis", [n("Softmax", ["x"], ["y"], name="sm", axis=2)], []
    yield "refused_softmax_last_of_planes", [n("Softmax", ["x"], ["y"], name="sm", axis=-1)], []


def main():
    for name, nodes, inits in cases():
        onnx.save(model(name, nodes, inits), os.path.join(sys.argv[1], name + ".onnx"))
        print(name)


if __name__ == "__main__":
    main()
