// A served batch's input (ServedVersion::assemble and decode): the requests' tensors one after
// another, or their encoded images decoded with the checkpoint's evaluation preprocessing; on a
// GPU into pinned staging (or nvJPEG's device batch), on the CPU into plain memory.
#include <cstring>
#include <string>
#include <vector>

#include "apps/serve/served_instance.h"
#include "datasets/batch_decoder.h"
#include "datasets/preprocess.h"
#include "engine/backends/backend.h"
#include "engine/core/error.h"
#include "engine/inference/graphed_batches.h"

namespace convoy::serve {

Tensor ServedVersion::assemble(Instance& instance, std::vector<InferJob>& jobs, std::vector<int64_t>& first_row) {
  int64_t n = 0;
  for (const InferJob& j : jobs) {
    first_row.push_back(n);
    n += j.rows();
  }
  const DType dtype = jobs.front().input.dtype();
  if (jobs.size() == 1) {
    const Tensor& only = jobs.front().input;
    // An input in a client's CUDA shared memory on this GPU goes up device to device (GraphedBatches).
    if (instance.graphed && only.device() == instance.backend->device()) return only;
    if (!instance.graphed) return only.device().is_cpu() ? only : only.to_cpu();
  }
  // On a GPU the batch is assembled in pinned staging, which uploads without a bounce; an input in
  // system shared memory is copied there straight from the client's mapping.
  Tensor host = (instance.graphed && dtype == DType::u8
                     ? instance.graphed->staging(n)
                     : Tensor::empty({n, input_shape_[0], input_shape_[1], input_shape_[2]}, dtype))
                    .with_layout(jobs.front().input.layout());  // the jobs' bytes as sent, one after another
  auto* dst = static_cast<char*>(host.raw());
  for (const InferJob& j : jobs) {
    if (j.input.device().is_cpu())
      std::memcpy(dst, j.input.raw(), j.input.nbytes());
    else  // in CUDA shared memory, batched with other requests: its rows join them on the host
      j.input.allocator()->copy_to_host(dst, j.input.raw(), j.input.nbytes());
    dst += j.input.nbytes();
  }
  return host;
}

Tensor ServedVersion::decode(Instance& instance, std::vector<InferJob>& jobs, std::vector<int64_t>& first_row) {
  std::vector<EncodedSample> samples;
  std::vector<size_t> owner;  // the job of each sample
  for (size_t i = 0; i < jobs.size(); ++i)
    for (size_t e = 0; e < jobs[i].encoded.size(); ++e) {
      const std::string& b = jobs[i].encoded[e];
      samples.push_back({{reinterpret_cast<const uint8_t*>(b.data()), b.size()}, "input element " + std::to_string(e), 0});
      owner.push_back(i);
    }
  std::vector<std::string> bad(jobs.size());  // the first unreadable image of each job
  std::vector<int64_t> row(samples.size(), -1);
  Tensor images;  // (kept, C, H, W) u8
  if (instance.decoder) {
    BatchDecoder::Result r = instance.decoder->decode(samples, preprocess_, SampleMode::eval, /*skip_bad=*/true);
    for (size_t k : r.skipped)
      if (bad[owner[k]].empty()) bad[owner[k]] = samples[k].name + " is not a JPEG or PNG image that can be read";
    int64_t next = 0;
    for (size_t k = 0, s = 0; k < samples.size(); ++k) {
      if (s < r.skipped.size() && r.skipped[s] == k) {
        ++s;
        continue;
      }
      row[k] = next++;
    }
    images = r.images;
  } else {
    const int64_t n = static_cast<int64_t>(samples.size());
    Tensor host = instance.graphed ? instance.graphed->staging(n)
                                   : Tensor::empty({n, input_shape_[0], input_shape_[1], input_shape_[2]}, DType::u8);
    const auto sample_bytes = static_cast<size_t>(shape_numel(input_shape_));
    int64_t next = 0;
    for (size_t k = 0; k < samples.size(); ++k) {
      try {
        decode_preprocess(samples[k].bytes, samples[k].name, preprocess_, SampleMode::eval, 0,
                          host.data<uint8_t>() + static_cast<size_t>(next) * sample_bytes);
        row[k] = next++;
      } catch (const InputError& e) {
        if (bad[owner[k]].empty()) bad[owner[k]] = e.what();
      }
    }
    if (next > 0) images = host.slice_rows(0, next);
  }
  for (size_t i = 0, k = 0; i < jobs.size(); k += jobs[i].encoded.size(), ++i) {
    first_row.push_back(bad[i].empty() ? row[k] : -1);
    if (bad[i].empty()) continue;
    metrics_.request_failure++;
    jobs[i].done({InferResult::Status::invalid, bad[i], {}, {}});
    jobs[i].done = nullptr;
  }
  return images;
}

}  // namespace convoy::serve
