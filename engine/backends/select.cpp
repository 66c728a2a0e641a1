// Device selection: "auto" prefers the GPU and falls back to the CPU with one line why.
#include <ostream>

#include "engine/backends/backend.h"
#include "engine/core/error.h"

namespace convoy {

std::unique_ptr<Backend> select_backend(std::string_view device, const BackendOptions& options,
                                        std::ostream& log) {
  if (device == "cpu") return make_cpu_backend(options);
  if (device == "auto") {
    const std::string why = cuda_unavailable_reason();
    if (why.empty()) return make_cuda_backend(0, options);
    log << "no usable GPU (" << why << "); running on the CPU" << std::endl;
    return make_cpu_backend(options);
  }
  int index = 0;
  if (device.rfind("cuda:", 0) == 0) {
    const std::string digits(device.substr(5));
    if (digits.empty() || digits.size() > 3 || digits.find_first_not_of("0123456789") != std::string::npos)
      throw InputError("device '" + std::string(device) + "': expected cuda:N with a device number");
    index = std::stoi(digits);
  } else if (device != "cuda") {
    throw InputError("device '" + std::string(device) + "': expected auto, cpu, cuda or cuda:N");
  }
  const std::string why = cuda_unavailable_reason();
  if (!why.empty()) throw DeviceError("device '" + std::string(device) + "' was asked for, but " + why);
  return make_cuda_backend(index, options);
}

}  // namespace convoy
