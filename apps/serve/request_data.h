#pragma once
// Parts of the streaming infer request reader (kserve_request.cpp): the request's memory budget,
// and the sink its input's `data` numbers go through into the tensor.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "apps/serve/kserve_json.h"

namespace convoy::serve {

// The bytes one request's reading has taken, against request_memory_budget; RequestError(413)
// naming the budget as soon as a charge passes it, before what it is for is allocated.
struct RequestBudget {
  const TensorSpec& spec;
  uint64_t limit;
  uint64_t used = 0;

  void charge(uint64_t bytes) {
    used += bytes;
    if (used > limit) exceeded();
  }
  [[noreturn]] void exceeded() const;
};

// The elements of `data`, in order: checked and written into the input tensor once it is known
// (its name, datatype and shape came first, as clients send them), else kept as floats (exact for
// UINT8's 0 to 255) within the budget until it is. RequestError(400) with the messages of the
// element that is refused, whichever way the data came.
class DataSink {
 public:
  explicit DataSink(RequestBudget& budget) : budget_(budget) {}
  // From now on the elements go into `input` (UINT8 or FP32, (n, C, H, W)), the pending ones first.
  void target(Tensor& input);
  bool targeted() const { return dst_ != nullptr; }
  // One element: `integral` when JSON wrote it as an integer; `text` as written, for floats.
  void add(double x, bool integral, std::string_view text) {
    if (!dst_) return pend(x, integral, text);
    if (written_ >= count_) too_many();
    if (is_u8_) {
      if (!integral || x < 0 || x > 255) not_u8();
      static_cast<uint8_t*>(dst_)[written_++] = static_cast<uint8_t>(x);
    } else {
      if (!fits_f32(x)) not_f32(x, text);
      static_cast<float*>(dst_)[written_++] = static_cast<float>(x);
    }
  }
  // After `data` and the input's other members: every element of `input` written.
  void finish(Tensor& input, const Shape& shape);

 private:
  // As a float: 1e39 would be inf (and nan fails too); checked before the conversion, which would
  // be undefined behaviour.
  static bool fits_f32(double x) { return std::fabs(x) <= std::numeric_limits<float>::max(); }
  [[noreturn]] static void not_u8();
  [[noreturn]] static void not_f32(double x, std::string_view text);
  [[noreturn]] void too_many() const;
  void pend(double x, bool integral, std::string_view text);

  static constexpr size_t kNone = std::numeric_limits<size_t>::max();
  RequestBudget& budget_;
  void* dst_ = nullptr;
  bool is_u8_ = false;
  size_t count_ = 0, written_ = 0;
  std::vector<float> pending_;  // (elements) before the tensor is known
  size_t first_not_u8_ = kNone, first_not_f32_ = kNone;  // the first each datatype refuses
  double not_f32_value_ = 0;
  std::string not_f32_text_;
};

}  // namespace convoy::serve
