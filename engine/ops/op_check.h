#pragma once
// The one vocabulary of op argument checks, shared by every backend. A failed check is a
// bug in the caller (a layer, the trainer), not the user's input: it throws InternalError
// naming the op, the argument and what it got.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "engine/core/tensor.h"

namespace convoy {

// "(2, 3, 4, 4) F32 nhwc on cuda:0", or "undefined".
std::string describe(const Tensor& t);
bool is_floating(DType dtype);  // f32, bf16 or f16

struct NamedArg {
  const Tensor& tensor;
  const char* name;
};

class OpCheck {
 public:
  // Checks the arguments of `op` for a backend on `device`.
  OpCheck(const char* op, Device device) : op_(op), device_(device) {}

  [[noreturn]] void fail(const std::string& message) const;
  // Fails with `message` unless `condition` holds. `message` is a string literal or a callable
  // returning the string, called only on failure: the checks run on every op call, and building
  // describe() strings for each would cost more than a small op itself.
  template <class Message>
  const OpCheck& that(bool condition, Message&& message) const {
    if (!condition) {
      if constexpr (std::is_invocable_v<Message&>)
        fail(message());
      else
        fail(message);
    }
    return *this;
  }
  // Defined and on this device.
  const OpCheck& here(const Tensor& t, const char* name) const;
  // here() with a floating dtype (f32, bf16, f16).
  const OpCheck& floating(const Tensor& t, const char* name) const;
  // here() with dtype f32 and `numel` elements.
  const OpCheck& f32(const Tensor& t, int64_t numel, const char* name) const;
  // The same shape, dtype and layout.
  const OpCheck& like(const Tensor& a, const char* a_name, const Tensor& b, const char* b_name) const;
  const OpCheck& rank(const Tensor& t, int64_t rank, const char* name) const;
  // Each an f32 vector of `channels` elements on this device (batch-norm parameters).
  const OpCheck& per_channel(int64_t channels, std::initializer_list<NamedArg> tensors) const;

  const char* op() const { return op_; }

 private:
  const char* op_;
  Device device_;
};

}  // namespace convoy
