// The CUDA entry points of a build without CUDA (CONVOY_CUDA=OFF): every call says so.
#include <memory>
#include <string>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/core/error.h"

namespace convoy {

std::string cuda_unavailable_reason() { return "CUDA support was not compiled in (CONVOY_CUDA=OFF)"; }

std::unique_ptr<Backend> make_cuda_backend(int device_index, const BackendOptions& options) {
  throw DeviceError("cuda:" + std::to_string(device_index) + " cannot be used: " +
                    cuda_unavailable_reason());
}

std::vector<std::string> cuda_doctor_lines() { return {"CUDA: " + cuda_unavailable_reason()}; }

}  // namespace convoy
