#pragma once
// A small residual ReLU network for the GPU's 8-bit plan (issue 37), for Fashion-MNIST's 1x28x28:
// a stem the plan keeps in bf16 (one input channel), three 8-bit convolutions (one with a
// residual add), an 8-bit max pool, a global average pool into the bf16 classifier.
namespace convoy::testing {

inline constexpr const char* kEightBitNetYaml = R"(name: eight_bit_net
input: [1, 28, 28]
classes: 10
layers:
  - {name: stem, type: conv2d, out_channels: 32, kernel: 3, padding: 1, bias: false}
  - {name: stem_bn, type: batchnorm2d}
  - {name: stem_relu, type: relu}
  - {name: c1, type: conv2d, out_channels: 64, kernel: 3, stride: 2, padding: 1, bias: false}
  - {name: c1_bn, type: batchnorm2d}
  - {name: c1_relu, type: relu}
  - {name: c2, type: conv2d, out_channels: 64, kernel: 3, padding: 1, bias: false}
  - {name: c2_bn, type: batchnorm2d}
  - {name: join, type: add, inputs: [c2_bn, c1_relu]}
  - {name: join_relu, type: relu}
  - {name: pool, type: maxpool2d, kernel: 2}
  - {name: c3, type: conv2d, out_channels: 128, kernel: 3, padding: 1, bias: false}
  - {name: c3_bn, type: batchnorm2d}
  - {name: c3_relu, type: relu}
  - {name: gap, type: global_avg_pool}
  - {name: flat, type: flatten}
  - {name: fc, type: linear, out_features: 10}
)";

}  // namespace convoy::testing
