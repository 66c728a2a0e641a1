#include "apps/bench/backend_pool.h"

#include <sstream>

#include "engine/core/error.h"

namespace convoy {

Backend* BackendPool::get(const std::string& device, bool tf32) {
  const std::string key = device + (tf32 ? " tf32" : "");
  if (auto it = backends_.find(key); it != backends_.end()) return it->second.get();
  if (unusable_.count(device)) return nullptr;
  try {
    std::ostringstream log;
    if (device == "cpu") {
      backends_[key] = make_cpu_backend(options_);
    } else {
      // The bare reason for the record and the table, not select_backend's sentence around it.
      const std::string why = cuda_unavailable_reason();
      if (!why.empty()) throw DeviceError(why);
      BackendOptions options = options_;
      options.tf32 = tf32;
      backends_[key] = select_backend(device, options, log);
    }
    return backends_[key].get();
  } catch (const Error& e) {
    unusable_[device] = e.what();
    return nullptr;
  }
}

}  // namespace convoy
