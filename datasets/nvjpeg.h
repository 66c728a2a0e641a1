#pragma once
// GPU JPEG decoding with NVIDIA's nvJPEG, built when CMake finds it (CONVOY_NVJPEG AUTO/ON/OFF);
// without it these say why not.
#include <memory>
#include <string>

#include "datasets/batch_decoder.h"

namespace convoy {

// Empty when nvJPEG is compiled in, else the reason ("nvJPEG was not compiled in ...").
std::string nvjpeg_unavailable_reason();

// A BatchDecoder on CUDA device `device_index`: nvJPEG's hardware backend (the NVJPG engines of
// A100/H100/H200) where the GPU has one and `hardware` (EngineOptions::nvjpeg_hardware) asks for
// it, else its default backend; crops and resizes on the GPU with the CPU path's boxes and PIL's
// antialiased bilinear filter. Throws DeviceError when nvJPEG is not compiled in or cannot start.
std::shared_ptr<BatchDecoder> make_nvjpeg_batch_decoder(int device_index, bool hardware = true);

}  // namespace convoy
