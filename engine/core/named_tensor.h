#pragma once
// A tensor with its state-dict name ("conv1.weight"): what checkpoints, models and
// optimizers exchange.
#include <string>

#include "engine/core/tensor.h"

namespace convoy {

struct NamedTensor {
  std::string name;
  Tensor tensor;  // any shape and dtype, any device
};

}  // namespace convoy
