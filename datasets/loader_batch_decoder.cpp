// The loader's batches through a BatchDecoder: the workers read the files, the decoder (nvJPEG
// on the GPU) decodes, crops and resizes the whole batch at once.
#include <algorithm>
#include <vector>

#include "datasets/loader.h"
#include "engine/core/counter_rng.h"
#include "engine/core/error.h"

namespace convoy {

Batch DataLoader::assemble_encoded(const EpochPlan& plan, int64_t batch_index, const FileDataset& files,
                                   Stats& stats) const {
  const std::vector<int64_t>& order = *plan.order;
  const auto n = static_cast<int64_t>(order.size());
  const int64_t begin = batch_index * options_.batch_size;
  const int64_t count = std::min(options_.batch_size, n - begin);
  // One set of file buffers per worker thread, grown to its largest files: no allocation per batch.
  thread_local std::vector<std::vector<uint8_t>> buffers;
  if (buffers.size() < static_cast<size_t>(count)) buffers.resize(static_cast<size_t>(count));
  Batch batch;
  batch.index = batch_index;
  std::vector<EncodedSample> samples;
  std::vector<int64_t> ids;  // the dataset index of each of `samples`
  samples.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t s = order[static_cast<size_t>(begin + i)];
    std::vector<uint8_t>& bytes = buffers[static_cast<size_t>(i)];
    try {
      files.read_bytes(s, bytes);
    } catch (const BadSampleError&) {
      if (!options_.skip_bad_samples) throw;
      ++batch.skipped;
      continue;
    }
    // The seed of the sample's crop, as assemble() gives it to Dataset::load.
    samples.push_back({std::span<const uint8_t>(bytes.data(), bytes.size()),
                       files.samples()[static_cast<size_t>(s)].path.string(),
                       counter_hash(plan.seed, static_cast<uint64_t>(s))});
    ids.push_back(s);
  }
  BatchDecoder::Result decoded =
      options_.batch_decoder->decode(samples, options_.preprocess, options_.mode, options_.skip_bad_samples);
  std::vector<bool> left_out(samples.size(), false);
  for (size_t k : decoded.skipped) left_out.at(k) = true;
  std::vector<int32_t> labels;
  for (size_t k = 0; k < samples.size(); ++k)
    if (!left_out[k]) labels.push_back(dataset_.label(ids[k]));
  CONVOY_CHECK(decoded.images.defined() && decoded.images.dim(0) == static_cast<int64_t>(labels.size()),
               "the batch decoder's images and the kept samples differ in number");
  batch.images = std::move(decoded.images);
  batch.skipped += static_cast<int64_t>(decoded.skipped.size());
  batch.labels = Tensor::empty({static_cast<int64_t>(labels.size())}, DType::i32);
  std::copy(labels.begin(), labels.end(), batch.labels.data<int32_t>());
  stats.samples = static_cast<int64_t>(labels.size());
  stats.skipped = batch.skipped;
  return batch;
}

}  // namespace convoy
