#pragma once
// IDX files (the MNIST format), raw or gzip-compressed.
#include <cstdint>
#include <filesystem>

#include "engine/core/tensor.h"

namespace convoy {

// One IDX array. Only the unsigned-byte element type (0x08) is supported, which is what
// MNIST and Fashion-MNIST use.
struct IdxArray {
  Tensor data;  // u8 on the CPU, shape = the dims in the file's header, e.g. (N, H, W)
};

// Reads an IDX file; gzip is detected by its magic (1f 8b), so `x.gz` and `x` both work.
// Throws InputError naming the file on a missing file, a wrong magic, an unsupported
// element type, truncated data, trailing bytes, a corrupt gzip stream, or dims whose
// product overflows or exceeds what the file can hold (checked before allocating).
IdxArray read_idx(const std::filesystem::path& path);

}  // namespace convoy
