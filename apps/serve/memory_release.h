#pragma once
// Giving the memory of large requests back to the system once they are answered, where glibc as
// the engine tunes it would keep it (memory_release.cpp says why and what it costs).
#include <cstdint>
#include <utility>

namespace convoy::serve {

// convoy serve's heap: free memory at the top of any arena past kServeTrimThreshold goes back to
// the system as it is freed. Call once at the start, before the server's threads.
inline constexpr uint64_t kServeTrimThreshold = uint64_t{16} << 20;
void configure_serving_heap();

// Requests whose bodies (as received, plus inflated) reach this many bytes are followed by
// release_memory_after_request's trim (below, what stays is under kServeTrimThreshold).
inline constexpr uint64_t kReleaseAfterBytes = uint64_t{8} << 20;

// After a request of `body_bytes`, once its body is freed: at kReleaseAfterBytes or more, returns
// the free memory inside the heap's arenas to the system (malloc_trim); a no-op below.
void release_memory_after_request(uint64_t body_bytes);

// Calls release_memory_after_request with the bytes added when it is destroyed, wherever that is
// (a worker, an I/O thread); moving it moves that duty, a copy has none. As a member declared
// before the body it counts, it runs once the body is freed.
class ReleaseAfterRequest {
 public:
  ReleaseAfterRequest() = default;
  ReleaseAfterRequest(const ReleaseAfterRequest&) {}
  ReleaseAfterRequest(ReleaseAfterRequest&& o) noexcept : bytes_(std::exchange(o.bytes_, 0)) {}
  ReleaseAfterRequest& operator=(const ReleaseAfterRequest&) { return *this; }
  ReleaseAfterRequest& operator=(ReleaseAfterRequest&& o) noexcept {
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~ReleaseAfterRequest() { release_memory_after_request(bytes_); }
  void add(uint64_t bytes) { bytes_ += bytes; }

 private:
  uint64_t bytes_ = 0;
};

}  // namespace convoy::serve
