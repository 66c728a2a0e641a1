#pragma once
// Batch norm in evaluation as a per-channel affine map, y = x * scale + shift with
// scale = gamma / sqrt(var + eps) and shift = beta - mean * scale, in double: what folding it
// into the convolution before it needs (or running it alone as a depthwise 1x1 convolution).
// One definition for the GPU's fused convolutions (BatchNorm2d::fold_conv), the CPU inference
// plan (plan_weights.cpp) and the GPU's 8-bit plan (eight_bit_graph.cpp).
#include <vector>

#include "engine/layers/layer.h"

namespace convoy {

struct BatchNormAffine {
  std::vector<double> scale, shift;  // (C)
};

// `bn`: a batchnorm2d layer (its weight and bias, running mean and variance, and eps).
BatchNormAffine batch_norm_affine(Layer& bn);

// Folds the batch norm into the layer before it: `weight` holds one block per output channel
// (K blocks), `bias` K values; they become weight * scale and bias * scale + shift.
void fold_batch_norm(const BatchNormAffine& bn, std::vector<float>& weight, std::vector<float>& bias);

}  // namespace convoy
