#pragma once
// The elementwise and data-movement ops: add, add_inplace, concat/split along channels,
// dropout, cast and fill.
#include <cstdint>
#include <span>

#include "engine/core/tensor.h"

namespace convoy {

// InternalError on failure; every tensor must live on `device`.
void check_add(const Tensor& a, const Tensor& b, const Tensor& y, Device device);
void check_add_inplace(const Tensor& y, const Tensor& x, Device device);
// xs (N, C_i, ...) stack along dimension 1 into y (N, sum C_i, ...), same dtype and layout.
// `op` is "concat_channels" or "split_channels".
void check_concat_channels(const char* op, std::span<const Tensor* const> xs, const Tensor& y, Device device);
void check_dropout(const char* op, float p, const Tensor& x, const Tensor& y, Device device);
// The same shape; the same layout unless 4-D (cast converts nchw <-> nhwc).
void check_cast(const Tensor& x, const Tensor& y, Device device);
void check_fill(const Tensor& y, Device device);

}  // namespace convoy
