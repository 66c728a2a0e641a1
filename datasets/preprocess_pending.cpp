// Placeholder while preprocess.cpp is being written on its branch; deleted with its arrival.
#include "datasets/preprocess.h"

#include "engine/core/error.h"

namespace convoy {

void preprocess_pixels(const uint8_t*, int64_t, int64_t, int64_t, const Preprocess&, SampleMode, uint64_t,
                       uint8_t*) {
  throw InputError("preprocessing: not built yet");
}
void decode_preprocess(std::span<const uint8_t>, std::string_view name, const Preprocess&, SampleMode, uint64_t,
                       uint8_t*) {
  throw InputError(std::string(name) + ": image decoding not built yet");
}

}  // namespace convoy
