#include "engine/core/tensor.h"

#include <malloc.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <sstream>

#include "engine/core/error.h"

namespace convoy {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::f16: return 2;
    case DType::i32: return 4;
    case DType::u8: return 1;
  }
  throw InternalError("unknown dtype");
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    case DType::i32: return "I32";
    case DType::u8: return "U8";
  }
  throw InternalError("unknown dtype");
}

DType dtype_from_name(std::string_view name) {
  for (DType d : {DType::f32, DType::bf16, DType::f16, DType::i32, DType::u8})
    if (dtype_name(d) == name) return d;
  throw InputError("unsupported dtype '" + std::string(name) + "' (expected F32, BF16, F16, I32 or U8)");
}

std::string Device::str() const {
  return kind == DeviceKind::cpu ? std::string("cpu") : "cuda:" + std::to_string(index);
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n))
      throw InputError("shape " + shape_str(shape) + " has too many elements (more than 2^63)");
  return n;
}

int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out))
    return (a < 0) != (b < 0) ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
  return out;
}

int64_t saturating_add(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out))
    return a < 0 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
  return out;
}

std::string shape_str(const Shape& shape) {
  std::ostringstream out;
  out << '(';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << (shape.size() == 1 ? ",)" : ")");
  return out.str();
}

namespace {

class CpuAllocator final : public Allocator {
 public:
  CpuAllocator() {
    // Every training step frees and reallocates the same activation-sized buffers. By default
    // glibc serves big blocks with mmap and returns them to the kernel, so each step faults
    // its pages in again (7% of a CPU training step under perf); keeping them in the heap made
    // lenet5 training ~10% faster on the 2-core VM (interleaved runs, 3,596 -> 3,978 img/s).
    mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest on 64-bit
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
  }
  Device device() const override { return Device::cpu(); }
  void* allocate(size_t bytes) override {
    // 64-byte alignment suits AVX-512 and oneDNN.
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void deallocate(void* ptr, size_t) override { std::free(ptr); }
  void copy_to_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_from_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_on_device(void* dst, const void* src, size_t bytes) override { std::memmove(dst, src, bytes); }
  void fill_zero(void* ptr, size_t bytes) override { std::memset(ptr, 0, bytes); }
};

}  // namespace

const std::shared_ptr<Allocator>& cpu_allocator() {
  static const std::shared_ptr<Allocator> allocator = std::make_shared<CpuAllocator>();
  return allocator;
}

Storage::Storage(size_t bytes, std::shared_ptr<Allocator> allocator)
    : bytes_(bytes), allocator_(std::move(allocator)) {
  data_ = allocator_->allocate(bytes_ == 0 ? 1 : bytes_);
}

Storage::~Storage() { allocator_->deallocate(data_, bytes_ == 0 ? 1 : bytes_); }

Tensor::Tensor(Shape shape, DType dtype, const std::shared_ptr<Allocator>& allocator, Layout layout)
    : shape_(std::move(shape)), dtype_(dtype), layout_(layout) {
  for (int64_t d : shape_)
    if (d < 0) throw InternalError("negative dimension in shape " + shape_str(shape_));
  CONVOY_CHECK(layout_ == Layout::nchw || shape_.size() == 4, "nhwc needs a 4-D shape");
  const int64_t n = shape_numel(shape_);
  if (n > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(dtype_size(dtype_)))
    throw InputError("tensor of shape " + shape_str(shape_) + " is too large to address");
  storage_ = std::make_shared<Storage>(nbytes(), allocator);
}

Tensor Tensor::empty(Shape shape, DType dtype) { return Tensor(std::move(shape), dtype, cpu_allocator()); }

Tensor Tensor::zeros(Shape shape, DType dtype) {
  Tensor t = empty(std::move(shape), dtype);
  t.zero_();
  return t;
}

Tensor Tensor::from_floats(const std::vector<float>& values, Shape shape) {
  Tensor t = empty(std::move(shape), DType::f32);
  CONVOY_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "value count does not match shape");
  std::memcpy(t.raw(), values.data(), t.nbytes());
  return t;
}

Tensor Tensor::from_ints(const std::vector<int32_t>& values, Shape shape) {
  Tensor t = empty(std::move(shape), DType::i32);
  CONVOY_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "value count does not match shape");
  std::memcpy(t.raw(), values.data(), t.nbytes());
  return t;
}

int64_t Tensor::dim(int i) const {
  const int n = ndim();
  if (i < 0) i += n;
  CONVOY_CHECK(i >= 0 && i < n, "dimension index out of range for shape " + shape_str(shape_));
  return shape_[static_cast<size_t>(i)];
}

Device Tensor::device() const { return defined() ? storage_->allocator()->device() : Device::cpu(); }

const std::shared_ptr<Allocator>& Tensor::allocator() const {
  CONVOY_CHECK(defined(), "undefined tensor has no allocator");
  return storage_->allocator();
}

template <class T>
void Tensor::check_type() const {
  CONVOY_CHECK(defined(), "access to an undefined tensor");
  bool ok = false;
  if constexpr (std::is_same_v<T, float>) ok = dtype_ == DType::f32;
  else if constexpr (std::is_same_v<T, uint16_t>) ok = dtype_ == DType::bf16 || dtype_ == DType::f16;
  else if constexpr (std::is_same_v<T, int32_t>) ok = dtype_ == DType::i32;
  else if constexpr (std::is_same_v<T, uint8_t>) ok = dtype_ == DType::u8;
  CONVOY_CHECK(ok, std::string("typed access does not match dtype ") + std::string(dtype_name(dtype_)));
}
template void Tensor::check_type<float>() const;
template void Tensor::check_type<uint16_t>() const;
template void Tensor::check_type<int32_t>() const;
template void Tensor::check_type<uint8_t>() const;

Tensor Tensor::reshape(Shape shape) const {
  CONVOY_CHECK(shape_numel(shape) == numel(),
               "cannot reshape " + shape_str(shape_) + " to " + shape_str(shape));
  CONVOY_CHECK(layout_ == Layout::nchw, "reshape of an nhwc tensor");
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  CONVOY_CHECK(ndim() >= 1 && 0 <= begin && begin <= end && end <= shape_[0], "row slice out of range");
  Tensor t = *this;
  const int64_t row = shape_[0] == 0 ? 0 : numel() / shape_[0];
  t.offset_ += static_cast<size_t>(begin * row) * dtype_size(dtype_);
  t.shape_[0] = end - begin;
  return t;
}

Tensor Tensor::with_layout(Layout layout) const {
  CONVOY_CHECK(layout == Layout::nchw || ndim() == 4, "nhwc needs a 4-D shape");
  Tensor t = *this;
  t.layout_ = layout;
  return t;
}

bool same_memory_order(const Tensor& a, const Tensor& b) {
  return a.layout() == b.layout() || (a.ndim() == 4 && (a.dim(1) == 1 || a.dim(2) * a.dim(3) == 1));
}

Tensor Tensor::to(const std::shared_ptr<Allocator>& allocator) const {
  Tensor t(shape_, dtype_, allocator, layout_);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to_cpu() const { return to(cpu_allocator()); }

Tensor Tensor::clone() const { return to(allocator()); }

void Tensor::copy_from(const Tensor& src) {
  CONVOY_CHECK(src.shape_ == shape_ && src.dtype_ == dtype_,
               "copy_from " + shape_str(src.shape_) + " to " + shape_str(shape_));
  layout_ = src.layout_;
  const Device from = src.device(), to = device();
  if (from == to) {
    allocator()->copy_on_device(raw(), src.raw(), nbytes());
  } else if (from.is_cpu()) {
    allocator()->copy_from_host(raw(), src.raw(), nbytes());
  } else if (to.is_cpu()) {
    src.allocator()->copy_to_host(raw(), src.raw(), nbytes());
  } else {
    Tensor staging = src.to_cpu();
    allocator()->copy_from_host(raw(), staging.raw(), nbytes());
  }
}

void Tensor::zero_() { allocator()->fill_zero(raw(), nbytes()); }

std::vector<float> Tensor::to_floats() const {
  const Tensor host = device().is_cpu() ? *this : to_cpu();
  const int64_t n = numel();
  std::vector<float> out(static_cast<size_t>(n));
  switch (dtype_) {
    case DType::f32: if (n > 0) std::memcpy(out.data(), host.raw(), n * sizeof(float)); break;
    case DType::bf16: { auto* p = host.data<uint16_t>(); for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(p[i]); break; }
    case DType::f16: { auto* p = host.data<uint16_t>(); for (int64_t i = 0; i < n; ++i) out[i] = f16_to_float(p[i]); break; }
    case DType::i32: { auto* p = host.data<int32_t>(); for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(p[i]); break; }
    case DType::u8: { auto* p = host.data<uint8_t>(); for (int64_t i = 0; i < n; ++i) out[i] = p[i]; break; }
  }
  return out;
}

uint16_t float_to_bf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

float bf16_to_float(uint16_t value) { return std::bit_cast<float>(static_cast<uint32_t>(value) << 16); }

#ifdef __FLT16_MANT_DIG__  // the compiler has _Float16 (GCC 12; clang from 15 on x86)
uint16_t float_to_f16(float value) { return std::bit_cast<uint16_t>(static_cast<_Float16>(value)); }

float f16_to_float(uint16_t value) { return static_cast<float>(std::bit_cast<_Float16>(value)); }
#else
// clang 14 (Debian 12's, for the fuzz targets) has no _Float16 on x86: the same conversions in
// software, round to nearest even as the hardware's (F. Giesen's float_to_half_fast3_rtne).
uint16_t float_to_f16(float value) {
  uint32_t u = std::bit_cast<uint32_t>(value);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint32_t h;
  if (u >= (127u + 16) << 23) {  // >= 65536: Inf, or NaN (quiet, top payload bits kept)
    h = u > 0x7F800000u ? 0x7E00u | ((u >> 13) & 0x3FFu) : 0x7C00u;
  } else if (u < 113u << 23) {  // a subnormal half or zero: let the FPU round
    const uint32_t magic = ((127u - 15) + (23 - 10) + 1) << 23;
    h = std::bit_cast<uint32_t>(std::bit_cast<float>(u) + std::bit_cast<float>(magic)) - magic;
  } else {  // normal (65520 and up round to Inf through the carry)
    const uint32_t odd = (u >> 13) & 1;
    u += (static_cast<uint32_t>(15 - 127) << 23) + 0xFFF + odd;
    h = u >> 13;
  }
  return static_cast<uint16_t>(h | (sign >> 16));
}

float f16_to_float(uint16_t value) {
  uint32_t u = static_cast<uint32_t>(value & 0x7FFF) << 13;
  const uint32_t exp = u & (0x7C00u << 13);
  u += (127u - 15) << 23;
  if (exp == 0x7C00u << 13) {
    u += (128u - 16) << 23;  // Inf, NaN (quieted, as the hardware does)
    if (u & 0x7FFFFFu) u |= 0x400000u;
  } else if (exp == 0) {  // zero, subnormal
    u += 1u << 23;
    u = std::bit_cast<uint32_t>(std::bit_cast<float>(u) - std::bit_cast<float>(113u << 23));
  }
  return std::bit_cast<float>(u | (static_cast<uint32_t>(value & 0x8000) << 16));
}
#endif

}  // namespace convoy
