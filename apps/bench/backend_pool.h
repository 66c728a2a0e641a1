#pragma once
// The backends a bench run's cases run on, made on first use and kept for the run.
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "engine/backends/backend.h"

namespace convoy {

// Backends by device (and TF32 math: a GPU's tf32 rows get a backend of their own); a device
// that cannot be used is remembered with why.
class BackendPool {
 public:
  BackendPool(int64_t threads, const CudaTunables& cuda) {
    options_.threads = static_cast<int>(threads);
    options_.cuda = cuda;
  }

  // Null where `device` cannot be used (why_unusable says why).
  Backend* get(const std::string& device, bool tf32 = false);
  const std::string& why_unusable(const std::string& device) { return unusable_[device]; }

 private:
  BackendOptions options_;
  std::map<std::string, std::unique_ptr<Backend>> backends_;  // "cuda:0", "cuda:0 tf32", "cpu"
  std::map<std::string, std::string> unusable_;  // device -> why
};

}  // namespace convoy
