#pragma once
// Parts of the streaming infer request reader (kserve_request.cpp): the request's memory budget,
// the guard on the tokens its JSON lexer buffers, and the sink its input's `data` numbers go
// through into the tensor.
#include <cmath>
#include <cstdint>
#include <iterator>
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

// Counts the characters of the string or number token nlohmann's lexer is reading: it buffers a
// whole token (twice) before the handler sees it, so a 60 MiB string would cost 120 MiB first.
// Strings here are names and ids, numbers a few dozen characters; longer ones are refused as
// they are read.
struct TokenGuard {
  static constexpr uint64_t kMaxNumberChars = 512;
  const RequestBudget& budget;
  uint64_t max_string;
  bool in_string = false, escaped = false;
  uint64_t run = 0;

  void see(char c) {
    if (in_string) {
      if (!escaped && c == '"') {
        in_string = false;
        run = 0;
        return;
      }
      escaped = !escaped && c == '\\';
      if (++run > max_string) budget.exceeded();
    } else if (c == '"') {
      in_string = true;
      run = 0;
    } else if ((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
      if (++run > kMaxNumberChars) throw RequestError(400, "a number in the request body is longer than 512 characters");
    } else {
      run = 0;
    }
  }
};

// The body's characters as nlohmann's iterator input adapter reads them, one at a time, through
// the guard.
class GuardedChars {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;
  GuardedChars(const char* p, TokenGuard* guard) : p_(p), guard_(guard) {}
  reference operator*() const { return *p_; }
  GuardedChars& operator++() {
    guard_->see(*p_++);
    return *this;
  }
  bool operator==(const GuardedChars& o) const { return p_ == o.p_; }
  bool operator!=(const GuardedChars& o) const { return p_ != o.p_; }

 private:
  const char* p_;
  TokenGuard* guard_;
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
