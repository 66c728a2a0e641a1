#pragma once
// Triton's shared-memory extensions (system and CUDA): regions that a client on the same host
// registers by name, a POSIX shared-memory object or a cudaIpcMemHandle_t of its device memory,
// and that its requests then name for their inputs and outputs instead of sending the bytes. One
// table serves HTTP and gRPC. A request holds the regions it uses (shared_ptr) until it is
// answered: unregistering takes the name away at once, and the mapping goes with its last user.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "apps/serve/kserve_json.h"
#include "engine/core/tensor.h"

namespace convoy::serve {

// A registered region, mapped into this process: `size()` bytes at `data()`, on the host (system
// shared memory) or on a GPU (CUDA shared memory).
class SharedMemoryRegion {
 public:
  virtual ~SharedMemoryRegion() = default;
  virtual Device device() const = 0;
  virtual char* data() const = 0;
  virtual uint64_t size() const = 0;
  // Copies between the region's memory and the host's, or within the region's device; ordered
  // before they return.
  virtual void to_host(void* host, const void* region, size_t bytes) const = 0;
  virtual void from_host(void* region, const void* host, size_t bytes) const = 0;
  virtual void on_device(void* dst, const void* src, size_t bytes) const = 0;
};

// The bytes of a region a request's tensor names (shared_memory_region, shared_memory_offset,
// shared_memory_byte_size), checked to lie inside it.
struct SharedMemorySlice {
  std::string region;  // its name
  std::shared_ptr<const SharedMemoryRegion> memory;
  uint64_t offset = 0;
  uint64_t byte_size = 0;

  // An allocator whose one allocation is these bytes, so that a Tensor made with it (an input's)
  // reads the region in place; an allocation of another size is a RequestError(400) saying that
  // `what`'s shared_memory_byte_size disagrees with its shape and datatype.
  std::shared_ptr<Allocator> allocator(const std::string& what) const;
  std::string read() const;  // a host copy of the bytes
  // RequestError(400) naming `what` when `bytes` do not fit in the slice.
  void check_fits(const std::string& what, uint64_t bytes) const;
  // Writes `bytes` at the slice's start, once check_fits() passes.
  void write(const std::string& what, const void* data, size_t bytes) const;
};

// The shared-memory parameters of one tensor as a request gives them, before they are checked.
struct SharedMemoryParams {
  std::optional<std::string> region;
  std::optional<int64_t> byte_size;
  std::optional<int64_t> offset;
  bool any() const { return region || byte_size || offset; }
};

struct SystemRegionStatus {
  std::string name, key;
  uint64_t offset = 0, byte_size = 0;
};
struct CudaRegionStatus {
  std::string name;
  int64_t device_id = 0;
  uint64_t byte_size = 0;
};

// A region named twice: 400 on HTTP, ALREADY_EXISTS on gRPC.
class RegionExists : public RequestError {
 public:
  using RequestError::RequestError;
};

// Why CUDA shared memory cannot be registered in this process (CUDA not compiled in, no GPU);
// empty when it can.
std::string cuda_shared_memory_unavailable_reason();

// The registered regions of both kinds; their names share one namespace, as Triton's do.
// Thread-safe.
class SharedMemoryRegistry {
 public:
  // Maps `byte_size` bytes at `offset` of the POSIX shared-memory object `key` (shm_open's name).
  // RequestError(400) when the object cannot be opened, or is smaller than offset + byte_size;
  // RegionExists when `name` is taken.
  void register_system(const std::string& name, const std::string& key, uint64_t offset, uint64_t byte_size);
  // Opens `raw_handle` (a cudaIpcMemHandle_t's bytes) on GPU `device_id`: `byte_size` bytes there.
  void register_cuda(const std::string& name, std::string_view raw_handle, int64_t device_id, uint64_t byte_size);
  // Removes the system (or CUDA) region `name`, or every one of that kind when `name` is empty. As
  // Triton, a name not registered (or of the other kind) is no error.
  void unregister_system(const std::string& name) { unregister(false, name); }
  void unregister_cuda(const std::string& name) { unregister(true, name); }
  // The regions of one kind, by name; `name` alone when given (RequestError(404) if it is not one).
  std::vector<SystemRegionStatus> system_status(const std::string& name) const;
  std::vector<CudaRegionStatus> cuda_status(const std::string& name) const;

  // The slice `params` name, for `what` ("input 'input'"): RequestError(400) when the region or
  // the byte size is missing, the region is not registered, or offset + byte_size is past its end.
  SharedMemorySlice slice(const std::string& what, const SharedMemoryParams& params) const;

 private:
  struct Entry {
    std::shared_ptr<const SharedMemoryRegion> memory;
    bool cuda = false;
    std::string key;      // system
    uint64_t offset = 0;  // system: into the object
    int64_t device_id = -1;
  };
  void add(const std::string& name, Entry entry);
  void unregister(bool cuda, const std::string& name);
  template <class Status, class Make>
  std::vector<Status> status(bool cuda, const std::string& name, Make make) const;

  mutable std::mutex mutex_;
  std::map<std::string, Entry> regions_;
};

// The region behind a cudaIpcMemHandle_t (cuda_shared_memory.cpp; without CUDA, an error saying so).
std::shared_ptr<const SharedMemoryRegion> open_cuda_region(std::string_view raw_handle, int64_t device_id,
                                                           uint64_t byte_size);

}  // namespace convoy::serve
