#pragma once
// What the oneDNN op files (cpu_conv, cpu_batchnorm, cpu_activation, cpu_pool, cpu_linear)
// share: descriptor and cache-key spelling, the oneDNN-error guard, and CpuOps::cached, a
// template because each op builds its primitive in its own lambda. Internal to
// engine/backends/cpu; the rest of the plumbing (execute, wrap) is in cpu_ops.cpp.
#include <oneapi/dnnl/dnnl.hpp>

#include <bit>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "engine/backends/cpu/cpu_ops.h"
#include "engine/core/error.h"

namespace convoy::cpu {

using Md = dnnl::memory::desc;
using Dims = dnnl::memory::dims;
using Tag = dnnl::memory::format_tag;

// Beyond this many cached primitives (e.g. inference over ever-changing batch sizes) the
// cache starts over rather than grow without bound.
inline constexpr size_t kMaxCachedPrimitives = 2048;

inline Md f32_md(const Dims& dims, Tag tag) { return Md(dims, dnnl::memory::data_type::f32, tag); }

// "op,v1,v2,...": a primitive's cache key from everything that shapes it.
inline std::string key_of(const char* op, std::initializer_list<int64_t> values) {
  std::string key(op);
  for (int64_t v : values) {
    key += ',';
    key += std::to_string(v);
  }
  return key;
}

// A float in a cache key, bit for bit (eps, alpha).
inline int64_t float_bits(float v) { return std::bit_cast<uint32_t>(v); }

// Turns a oneDNN failure into a convoy::DeviceError naming the op and its shapes.
template <class Describe, class Body>
void guarded(const char* op, Describe&& describe, Body&& body) {
  try {
    body();
  } catch (const dnnl::error& e) {
    throw DeviceError(std::string("oneDNN failed in ") + op + " for " + describe() + ": " +
                      e.what() + " (status " + std::to_string(static_cast<int>(e.status)) + ")");
  }
}

// Sets OpenMP's thread count for the oneDNN call on this thread, and restores it after.
class OmpThreadsScope {
 public:
  explicit OmpThreadsScope(int threads);
  ~OmpThreadsScope();
  OmpThreadsScope(const OmpThreadsScope&) = delete;
  OmpThreadsScope& operator=(const OmpThreadsScope&) = delete;

 private:
  int previous_ = 0;  // the count to restore; 0 = nothing to restore
};

template <class Make>
const CpuOps::Cached& CpuOps::cached(const std::string& key, Make&& make) {
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  if (cache_.size() >= kMaxCachedPrimitives) cache_.clear();
  // oneDNN sizes its thread partitioning when it builds the primitive, so build it under the
  // same thread count it will run with.
  OmpThreadsScope scope(threads_);
  return cache_.emplace(key, make()).first->second;
}

}  // namespace convoy::cpu
