#pragma once
// Safetensors files: an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype, shape and byte range, then the raw little-endian data. Readable by the
// `safetensors` package, PyTorch and the wider ecosystem.
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/file_io.h"
#include "engine/core/named_tensor.h"
#include "engine/core/tensor.h"

namespace convoy {

// Writes atomically through OutputFile (engine/core/file_io.h): a temporary file beside
// `path`, fsynced and renamed over it. On any failure (including a tensor whose copy to the
// host throws) the temporary file is removed, the old file at `path` is left intact, and the
// error propagates (I/O errors as InputError naming the file; a target that is not a regular
// file is refused). GPU tensors are copied to the host; nhwc tensors are written in their
// logical (N, C, H, W) order. Names must be unique and not "__metadata__".
void write_safetensors(const std::filesystem::path& path, std::span<const NamedTensor> tensors,
                       const std::map<std::string, std::string>& metadata = {});
// The same into `out`, not committed: for a command that commits several files only once all are written.
void write_safetensors(OutputFile& out, std::span<const NamedTensor> tensors,
                       const std::map<std::string, std::string>& metadata = {});

struct SafetensorsFile {
  std::filesystem::path path;
  std::vector<NamedTensor> tensors;  // on the CPU, nchw, in file (data offset) order
  std::map<std::string, std::string> metadata;
  // With ForeignDtypes::skip: tensors of a dtype Convoy has none for (I64, F64, ...), as
  // {name, safetensors dtype}, e.g. PyTorch's batch-norm counter {"bn1.num_batches_tracked", "I64"}.
  std::vector<std::pair<std::string, std::string>> skipped;

  bool contains(std::string_view name) const;
  // Throws InputError naming the tensor and the file when it is absent.
  const Tensor& at(std::string_view name) const;
};

// Reads and validates a whole file: header length vs file size, the JSON, dtype names,
// shapes vs byte ranges, and that the ranges tile the data exactly (no overlap, gap or
// trailing bytes, as the reference implementation requires). Errors are InputErrors
// naming the file.
// ForeignDtypes::skip reads past tensors whose dtype is a safetensors dtype Convoy has no DType
// for, listing them in `skipped` (files from PyTorch hold I64 counters); ::refuse fails on them.
enum class ForeignDtypes { refuse, skip };
SafetensorsFile read_safetensors(const std::filesystem::path& path, ForeignDtypes foreign = ForeignDtypes::refuse);

}  // namespace convoy
