#include "engine/ops/op_check.h"

#include "engine/core/error.h"

namespace convoy {

std::string describe(const Tensor& t) {
  if (!t.defined()) return "undefined";
  return shape_str(t.shape()) + " " + std::string(dtype_name(t.dtype())) +
         (t.layout() == Layout::nhwc ? " nhwc" : "") + " on " + t.device().str();
}

bool is_floating(DType dtype) {
  switch (dtype) {
    case DType::f32:
    case DType::bf16:
    case DType::f16: return true;
    case DType::i32:
    case DType::u8: return false;
  }
  return false;
}

void OpCheck::fail(const std::string& message) const {
  throw InternalError(std::string(op_) + ": " + message);
}

const OpCheck& OpCheck::here(const Tensor& t, const char* name) const {
  that(t.defined(), [&] { return std::string(name) + " is undefined"; });
  return that(t.device() == device_, [&] {
    return std::string(name) + " is " + describe(t) + ", expected a tensor on " + device_.str();
  });
}

const OpCheck& OpCheck::floating(const Tensor& t, const char* name) const {
  here(t, name);
  return that(is_floating(t.dtype()),
              [&] { return std::string(name) + " must be F32, BF16 or F16, got " + describe(t); });
}

const OpCheck& OpCheck::f32(const Tensor& t, int64_t numel, const char* name) const {
  here(t, name);
  return that(t.dtype() == DType::f32 && t.numel() == numel, [&] {
    return std::string(name) + " must be F32 with " + std::to_string(numel) + " elements, got " + describe(t);
  });
}

const OpCheck& OpCheck::like(const Tensor& a, const char* a_name, const Tensor& b,
                             const char* b_name) const {
  return that(a.shape() == b.shape() && a.dtype() == b.dtype() && a.layout() == b.layout(), [&] {
    return std::string(a_name) + " " + describe(a) + " and " + b_name + " " + describe(b) +
           " must have the same shape, dtype and layout";
  });
}

const OpCheck& OpCheck::rank(const Tensor& t, int64_t rank, const char* name) const {
  return that(t.ndim() == rank, [&] {
    return std::string(name) + " must be " + std::to_string(rank) + "-D, got " + describe(t);
  });
}

const OpCheck& OpCheck::per_channel(int64_t channels, std::initializer_list<NamedArg> tensors) const {
  for (const NamedArg& t : tensors) f32(t.tensor, channels, t.name);
  return *this;
}

}  // namespace convoy
