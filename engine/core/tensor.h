#pragma once
// Tensor: a value type over ref-counted storage owned by a device allocator.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace convoy {

enum class DType : uint8_t { f32, bf16, f16, i32, u8 };
size_t dtype_size(DType dtype);
// Safetensors spelling: "F32", "BF16", "F16", "I32", "U8".
std::string_view dtype_name(DType dtype);
// Parses the safetensors spelling; throws InputError on anything else.
DType dtype_from_name(std::string_view name);

enum class DeviceKind : uint8_t { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;
  static Device cpu() { return {DeviceKind::cpu, 0}; }
  static Device cuda(int index) { return {DeviceKind::cuda, index}; }
  bool is_cpu() const { return kind == DeviceKind::cpu; }
  bool is_cuda() const { return kind == DeviceKind::cuda; }
  std::string str() const;  // "cpu" or "cuda:0"
  bool operator==(const Device&) const = default;
};

// Memory layout of a 4-D tensor whose logical shape is always (N, C, H, W).
// nhwc exists for the GPU's tensor cores; the CPU path uses nchw only.
enum class Layout : uint8_t { nchw, nhwc };

using Shape = std::vector<int64_t>;
// The product of the dimensions. A product past int64_t is an InputError naming the shape
// (sizes come from user input: the callers bound them first; this is the last line of defence).
int64_t shape_numel(const Shape& shape);
// a * b, or the largest int64_t where it would overflow (for costs that are only reported).
int64_t saturating_mul(int64_t a, int64_t b);
int64_t saturating_add(int64_t a, int64_t b);
std::string shape_str(const Shape& shape);  // "(2, 3, 4)"

// Allocates and copies memory on one device. The CUDA one caches blocks.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_on_device(void* dst, const void* src, size_t bytes) = 0;
  virtual void fill_zero(void* ptr, size_t bytes) = 0;
};

// The process-wide host allocator (stateless, so not a mutable global).
const std::shared_ptr<Allocator>& cpu_allocator();

class Storage {
 public:
  Storage(size_t bytes, std::shared_ptr<Allocator> allocator);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  const std::shared_ptr<Allocator>& allocator() const { return allocator_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  std::shared_ptr<Allocator> allocator_;
};

class Tensor {
 public:
  Tensor() = default;
  // Uninitialized memory from `allocator`.
  Tensor(Shape shape, DType dtype, const std::shared_ptr<Allocator>& allocator,
         Layout layout = Layout::nchw);

  static Tensor empty(Shape shape, DType dtype = DType::f32);  // on the CPU
  static Tensor zeros(Shape shape, DType dtype = DType::f32);  // on the CPU
  static Tensor from_floats(const std::vector<float>& values, Shape shape);  // on the CPU
  static Tensor from_ints(const std::vector<int32_t>& values, Shape shape);  // on the CPU

  bool defined() const { return storage_ != nullptr; }
  // No other Tensor (copy or view) holds this storage: writing into it changes nothing else.
  bool sole_owner() const { return storage_ && storage_.use_count() == 1; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const;  // negative i counts from the end
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Layout layout() const { return layout_; }
  Device device() const;
  const std::shared_ptr<Allocator>& allocator() const;

  void* raw() { return static_cast<char*>(storage_->data()) + offset_; }
  const void* raw() const { return static_cast<const char*>(storage_->data()) + offset_; }
  // Typed access; checks that T matches the dtype (bf16/f16 as uint16_t).
  template <class T> T* data() { check_type<T>(); return static_cast<T*>(raw()); }
  template <class T> const T* data() const { check_type<T>(); return static_cast<const T*>(raw()); }

  // Same storage, new shape with the same numel (layout must be nchw).
  Tensor reshape(Shape shape) const;
  // Same storage, the rows [begin, end) of dimension 0.
  Tensor slice_rows(int64_t begin, int64_t end) const;
  // Same storage, reinterpreted with another layout tag (used by backends).
  Tensor with_layout(Layout layout) const;

  Tensor to(const std::shared_ptr<Allocator>& allocator) const;  // copy to another device
  Tensor to_cpu() const;
  Tensor clone() const;
  void copy_from(const Tensor& src);  // same shape and dtype, any devices
  void zero_();
  // Host copy converted to float (f32, bf16, f16, i32, u8 all supported).
  std::vector<float> to_floats() const;

 private:
  template <class T> void check_type() const;
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;  // bytes
  Shape shape_;
  DType dtype_ = DType::f32;
  Layout layout_ = Layout::nchw;
};

// Whether a and b (the same logical shape) hold their elements in the same memory order: the
// same layout, or a 4-D shape where nchw and nhwc coincide (one channel, or 1x1 spatial).
bool same_memory_order(const Tensor& a, const Tensor& b);

// bf16 helpers (round to nearest even).
uint16_t float_to_bf16(float value);
float bf16_to_float(uint16_t value);
uint16_t float_to_f16(float value);
float f16_to_float(uint16_t value);

}  // namespace convoy
