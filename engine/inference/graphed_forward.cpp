#include "engine/inference/graphed_forward.h"

#include <iostream>

#include "engine/core/error.h"

namespace convoy {

Tensor GraphedForward::run(const Tensor& x, bool stable_input) {
  last_replayed_ = false;
  if (unsupported_) return model_.forward(backend_, x, StepInfo{});
  const Key key{x.shape(), x.dtype(), x.layout()};
  auto it = recordings_by_shape_.find(key);
  const bool stale = it != recordings_by_shape_.end() &&
                     (!it->second.work->valid() || it->second.weights_version != model_.weights_version());
  if (stale) {
    recordings_by_shape_.erase(it);
    it = recordings_by_shape_.end();
  }
  if (it == recordings_by_shape_.end()) {
    Recording r;
    if (stable_input) {
      r.input = x;
    } else {
      r.input = backend_.empty(x.shape(), x.dtype(), x.layout());
      r.input.copy_from(x);
    }
    // One plain pass first: it makes the convolution plans (cuDNN's algorithm search waits for
    // the device, which a recording must not) and sizes the scratch buffers.
    model_.forward(backend_, r.input, StepInfo{});
    try {
      r.work = backend_.record([&] { r.output = model_.forward(backend_, r.input, StepInfo{}); });
    } catch (const DeviceError& e) {
      std::cerr << "convoy: " << e.what() << "; running without CUDA graphs\n";
      unsupported_ = true;
      return model_.forward(backend_, x, StepInfo{});
    }
    if (!r.work) {
      unsupported_ = true;
      return model_.forward(backend_, x, StepInfo{});
    }
    r.weights_version = model_.weights_version();
    ++recordings_;
    it = recordings_by_shape_.emplace(key, std::move(r)).first;
  } else if (it->second.input.raw() != x.raw()) {
    it->second.input.copy_from(x);
  }
  it->second.work->replay();
  last_replayed_ = true;
  return it->second.output;
}

}  // namespace convoy
