#pragma once
// normalize_augment: a u8 image batch to normalized floats, with random crop and flip.
#include <cstdint>
#include <vector>

#include "engine/core/tensor.h"

namespace convoy {

// Input normalization and augmentation of a u8 batch.
struct NormalizeAugment {
  float mean[4] = {0, 0, 0, 0};  // per channel, on the [0, 1] scale
  float std[4] = {1, 1, 1, 1};
  int64_t crop_padding = 0;  // random crop of the original size from the zero-padded image; 0 = off
  bool horizontal_flip = false;  // flip each sample with probability 1/2
};

// Normalization applied to every batch fed to the model; one mean and std serve every channel.
NormalizeAugment make_normalize(const std::vector<double>& mean, const std::vector<double>& std);

// images (N, C, H, W) u8 with C <= 4, nchw or nhwc (a client's channels-last pixels), y the same
// shape in a floating dtype.
void check_normalize_augment(const Tensor& images, const NormalizeAugment& a, const Tensor& y, Device device);

}  // namespace convoy
