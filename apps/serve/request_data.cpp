#include "apps/serve/request_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

namespace convoy::serve {

void RequestBudget::exceeded() const {
  throw RequestError(413, "the request needs more than " + std::to_string(limit) +
                              " bytes of memory to read (its budget: " +
                              (spec.memory_budget ? std::string("--http-max-request-memory")
                                                  : "the model's input at max batch as FP32, plus 1 MiB") +
                              ")");
}

void DataSink::not_u8() { throw RequestError(400, "input 'input': UINT8 data must be integers 0 to 255"); }

void DataSink::not_f32(double x, std::string_view text) {
  throw RequestError(400, "input 'input': FP32 data must be finite (" +
                              (text.empty() ? nlohmann::json(x).dump() : std::string(text.substr(0, 64))) +
                              " is not a finite float)");
}

void DataSink::too_many() const {
  throw RequestError(400, "input 'input': more data elements than its shape holds (" + std::to_string(count_) + ")");
}

void DataSink::pend(double x, bool integral, std::string_view text) {
  if (pending_.size() == pending_.capacity()) {  // grown by hand: charged before it is allocated
    const size_t more = std::max<size_t>(pending_.capacity(), 1024);
    budget_.charge(more * sizeof(float));
    pending_.reserve(pending_.capacity() + more);
  }
  if (first_not_u8_ == kNone && (!integral || x < 0 || x > 255)) first_not_u8_ = pending_.size();
  const bool fits = fits_f32(x);
  if (first_not_f32_ == kNone && !fits) {
    first_not_f32_ = pending_.size();
    not_f32_value_ = x;
    not_f32_text_ = text.substr(0, 64);
  }
  pending_.push_back(fits ? static_cast<float>(x) : 0.0f);
}

void DataSink::target(Tensor& input) {
  is_u8_ = input.dtype() == DType::u8;
  count_ = static_cast<size_t>(input.numel());
  // The pending elements, refused as they would have been had they come after the shape.
  const size_t n = pending_.size();
  const size_t first_bad = is_u8_ ? first_not_u8_ : first_not_f32_;
  if (first_bad < std::min(n, count_)) {
    if (is_u8_) not_u8();
    not_f32(not_f32_value_, not_f32_text_);
  }
  if (n > count_) too_many();
  if (is_u8_)
    std::transform(pending_.begin(), pending_.end(), input.data<uint8_t>(), [](float x) { return static_cast<uint8_t>(x); });
  else if (n > 0)
    std::memcpy(input.raw(), pending_.data(), n * sizeof(float));
  written_ = n;
  std::vector<float>().swap(pending_);
  dst_ = input.raw();
}

void DataSink::finish(Tensor& input, const Shape& shape) {
  if (!dst_) target(input);
  if (written_ != count_)
    throw RequestError(400, "input 'input': " + std::to_string(written_) + " data elements for shape " +
                                shape_str(shape) + " (" + std::to_string(count_) + ")");
}

}  // namespace convoy::serve
