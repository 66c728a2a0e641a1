#include "apps/serve/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "engine/backends/backend.h"

namespace convoy::serve {

std::string cuda_shared_memory_unavailable_reason() { return cuda_unavailable_reason(); }

namespace {

[[noreturn]] void bad(const std::string& what) { throw RequestError(400, what); }

// A POSIX shared-memory object's bytes [offset, offset + size), mapped shared and writable (outputs
// land there). mmap wants a page-aligned offset: the mapping starts at the page holding `offset`.
class SystemRegion final : public SharedMemoryRegion {
 public:
  SystemRegion(const std::string& name, const std::string& key, uint64_t offset, uint64_t size) : size_(size) {
    const int fd = shm_open(key.c_str(), O_RDWR, 0);
    if (fd < 0)
      bad("system shared memory region '" + name + "': cannot open key '" + key + "': " + std::strerror(errno));
    struct stat st {};
    if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < offset ||
        static_cast<uint64_t>(st.st_size) - offset < size) {
      close(fd);
      bad("system shared memory region '" + name + "': offset " + std::to_string(offset) + " + byte_size " +
          std::to_string(size) + " is past the end of '" + key + "' (" + std::to_string(st.st_size) + " bytes)");
    }
    const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    const uint64_t start = offset / page * page;
    head_ = offset - start;
    mapped_ = static_cast<size_t>(head_ + size);
    void* p = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(start));
    const int err = errno;
    close(fd);  // the mapping keeps the object
    if (p == MAP_FAILED)
      bad("system shared memory region '" + name + "': cannot map '" + key + "': " + std::strerror(err));
    base_ = static_cast<char*>(p);
  }
  ~SystemRegion() override { munmap(base_, mapped_); }
  SystemRegion(const SystemRegion&) = delete;
  SystemRegion& operator=(const SystemRegion&) = delete;

  Device device() const override { return Device::cpu(); }
  char* data() const override { return base_ + head_; }
  uint64_t size() const override { return size_; }
  void to_host(void* host, const void* region, size_t bytes) const override { std::memcpy(host, region, bytes); }
  void from_host(void* region, const void* host, size_t bytes) const override { std::memcpy(region, host, bytes); }
  void on_device(void* dst, const void* src, size_t bytes) const override { std::memmove(dst, src, bytes); }

 private:
  char* base_ = nullptr;
  size_t mapped_ = 0;
  uint64_t head_ = 0;  // from the page boundary to `offset`
  uint64_t size_;
};

// The memory of a tensor that reads a slice in place: allocate() hands out the slice's bytes, once
// the tensor's size is checked against it; the tensor's storage keeps the region mapped.
class SliceAllocator final : public Allocator {
 public:
  SliceAllocator(SharedMemorySlice slice, std::string what) : slice_(std::move(slice)), what_(std::move(what)) {}
  Device device() const override { return slice_.memory->device(); }
  void* allocate(size_t bytes) override {
    if (bytes != slice_.byte_size)
      bad(what_ + ": shared_memory_byte_size " + std::to_string(slice_.byte_size) + ", but its shape and datatype are " +
          std::to_string(bytes) + " bytes");
    return slice_.memory->data() + slice_.offset;
  }
  void deallocate(void*, size_t) override {}
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override { slice_.memory->to_host(host_dst, src, bytes); }
  void copy_from_host(void* dst, const void* host_src, size_t bytes) override {
    slice_.memory->from_host(dst, host_src, bytes);
  }
  void copy_on_device(void* dst, const void* src, size_t bytes) override { slice_.memory->on_device(dst, src, bytes); }
  void fill_zero(void*, size_t) override { bad(what_ + ": a shared-memory input is read-only"); }

 private:
  SharedMemorySlice slice_;
  std::string what_;
};

uint64_t checked_size(const std::string& what, int64_t value, const char* field) {
  if (value < 0) bad(what + ": " + field + " " + std::to_string(value) + " must be 0 or more");
  return static_cast<uint64_t>(value);
}

}  // namespace

std::shared_ptr<Allocator> SharedMemorySlice::allocator(const std::string& what) const {
  return std::make_shared<SliceAllocator>(*this, what);
}

std::string SharedMemorySlice::read() const {
  std::string out(byte_size, '\0');
  memory->to_host(out.data(), memory->data() + offset, byte_size);
  return out;
}

void SharedMemorySlice::check_fits(const std::string& what, uint64_t bytes) const {
  if (bytes > byte_size)
    bad(what + ": " + std::to_string(bytes) + " bytes do not fit in its shared_memory_byte_size " +
        std::to_string(byte_size) + " (region '" + region + "')");
}

void SharedMemorySlice::write(const std::string& what, const void* data, size_t bytes) const {
  check_fits(what, bytes);
  memory->from_host(memory->data() + offset, data, bytes);
}

void SharedMemoryRegistry::add(const std::string& name, Entry entry) {
  std::lock_guard lock(mutex_);
  if (!regions_.emplace(name, std::move(entry)).second)
    throw RegionExists(400, "shared memory region '" + name + "' is already registered");
}

void SharedMemoryRegistry::register_system(const std::string& name, const std::string& key, uint64_t offset,
                                           uint64_t byte_size) {
  if (name.empty()) bad("a shared memory region needs a name");
  if (byte_size == 0) bad("system shared memory region '" + name + "': byte_size must be more than 0");
  {
    std::lock_guard lock(mutex_);  // before the object is mapped: a taken name maps nothing
    if (regions_.count(name)) throw RegionExists(400, "shared memory region '" + name + "' is already registered");
  }
  Entry e;
  e.memory = std::make_shared<SystemRegion>(name, key, offset, byte_size);
  e.key = key;
  e.offset = offset;
  add(name, std::move(e));
}

void SharedMemoryRegistry::register_cuda(const std::string& name, std::string_view raw_handle, int64_t device_id,
                                         uint64_t byte_size) {
  if (name.empty()) bad("a shared memory region needs a name");
  if (const std::string why = cuda_shared_memory_unavailable_reason(); !why.empty())
    bad("CUDA shared memory region '" + name + "': " + why);
  if (byte_size == 0) bad("CUDA shared memory region '" + name + "': byte_size must be more than 0");
  {
    std::lock_guard lock(mutex_);
    if (regions_.count(name)) throw RegionExists(400, "shared memory region '" + name + "' is already registered");
  }
  Entry e;
  try {
    e.memory = open_cuda_region(raw_handle, device_id, byte_size);
  } catch (const RequestError& err) {
    bad("CUDA shared memory region '" + name + "': " + err.what());
  }
  e.cuda = true;
  e.device_id = device_id;
  add(name, std::move(e));
}

void SharedMemoryRegistry::unregister(bool cuda, const std::string& name) {
  std::vector<std::shared_ptr<const SharedMemoryRegion>> dropped;  // unmapped after the lock, unless in use
  std::lock_guard lock(mutex_);
  for (auto it = regions_.begin(); it != regions_.end();) {
    if (it->second.cuda == cuda && (name.empty() || it->first == name)) {
      dropped.push_back(std::move(it->second.memory));
      it = regions_.erase(it);
    } else {
      ++it;
    }
  }
}

template <class Status, class Make>
std::vector<Status> SharedMemoryRegistry::status(bool cuda, const std::string& name, Make make) const {
  std::vector<Status> out;
  std::lock_guard lock(mutex_);
  for (const auto& [n, e] : regions_)
    if (e.cuda == cuda && (name.empty() || n == name)) out.push_back(make(n, e));
  if (!name.empty() && out.empty())
    throw RequestError(404, std::string(cuda ? "CUDA" : "system") + " shared memory region '" + name +
                                "' is not registered");
  return out;
}

std::vector<SystemRegionStatus> SharedMemoryRegistry::system_status(const std::string& name) const {
  return status<SystemRegionStatus>(false, name, [](const std::string& n, const Entry& e) {
    return SystemRegionStatus{n, e.key, e.offset, e.memory->size()};
  });
}

std::vector<CudaRegionStatus> SharedMemoryRegistry::cuda_status(const std::string& name) const {
  return status<CudaRegionStatus>(true, name, [](const std::string& n, const Entry& e) {
    return CudaRegionStatus{n, e.device_id, e.memory->size()};
  });
}

SharedMemorySlice SharedMemoryRegistry::slice(const std::string& what, const SharedMemoryParams& params) const {
  if (!params.region || !params.byte_size)
    bad(what + ": shared memory needs both shared_memory_region and shared_memory_byte_size");
  SharedMemorySlice s;
  s.region = *params.region;
  s.byte_size = checked_size(what, *params.byte_size, "shared_memory_byte_size");
  s.offset = params.offset ? checked_size(what, *params.offset, "shared_memory_offset") : 0;
  {
    std::lock_guard lock(mutex_);
    const auto it = regions_.find(s.region);
    if (it == regions_.end()) bad(what + ": shared memory region '" + s.region + "' is not registered");
    s.memory = it->second.memory;
  }
  const uint64_t size = s.memory->size();
  if (s.offset > size || s.byte_size > size - s.offset)
    bad(what + ": shared_memory_offset " + std::to_string(s.offset) + " + shared_memory_byte_size " +
        std::to_string(s.byte_size) + " is past the end of region '" + s.region + "' (" + std::to_string(size) +
        " bytes)");
  return s;
}

}  // namespace convoy::serve
