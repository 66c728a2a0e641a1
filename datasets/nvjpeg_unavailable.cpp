// Built when nvJPEG is not (CONVOY_NVJPEG OFF, or AUTO without nvjpeg.h and libnvjpeg).
#include "datasets/nvjpeg.h"

#include "engine/core/error.h"

namespace convoy {

std::string nvjpeg_unavailable_reason() {
  return "nvJPEG was not compiled in (configure with -DCONVOY_NVJPEG=ON where the CUDA toolkit has nvjpeg.h)";
}

std::shared_ptr<BatchDecoder> make_nvjpeg_batch_decoder(int /*device_index*/, bool /*hardware*/) {
  throw DeviceError(nvjpeg_unavailable_reason());
}

}  // namespace convoy
