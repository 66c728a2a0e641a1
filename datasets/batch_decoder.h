#pragma once
// Decoding a whole batch of encoded image files at once, on another device than the loader's
// threads (nvJPEG on the GPU: datasets/nvjpeg.h). The loader's workers read the files and hand
// their bytes over; the crop boxes are the CPU path's (sample_box from the same seeds).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "datasets/preprocess.h"
#include "engine/core/tensor.h"

namespace convoy {

// One file of a batch: its bytes, its name for messages, the seed of its random crop.
struct EncodedSample {
  std::span<const uint8_t> bytes;
  std::string name;
  uint64_t seed = 0;
};

class BatchDecoder {
 public:
  virtual ~BatchDecoder() = default;
  // What the decoded batch holds: the images that could be read, in order, and which of
  // `samples` were left out as unreadable (only when skip_bad; otherwise the first one throws
  // BadSampleError naming its file).
  struct Result {
    Tensor images;                // (kept, p.channels, p.height, p.width) u8 on the decoder's device
    std::vector<size_t> skipped;  // indices into `samples`
  };
  // Thread-safe: every loader worker calls it with its own batch. The images are ready when it
  // returns (any copy of them may start on any stream), and their memory stays the batch's
  // until the tensor is dropped.
  virtual Result decode(std::span<const EncodedSample> samples, const Preprocess& p, SampleMode mode,
                        bool skip_bad) = 0;
  // Samples decoded on the device and those that went to the CPU (PNG, grey or odd JPEGs), so far.
  struct Counts {
    int64_t device = 0, cpu = 0;
  };
  virtual Counts counts() const = 0;
  // One line for logs: "nvJPEG 13.0 (hardware backend) on cuda:0".
  virtual std::string describe() const = 0;
};

}  // namespace convoy
