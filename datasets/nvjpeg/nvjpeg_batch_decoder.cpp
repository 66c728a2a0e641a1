// The BatchDecoder on nvJPEG: batched decoding (the hardware backend, the NVJPG engines of
// A100/H100/H200, where the GPU has them), then the CPU path's crops resampled on the GPU
// (crop_resize.cuh). What nvJPEG should not or cannot decode (PNG, grey, CMYK, progressive on
// the hardware backend, a truncated file) goes through decode_preprocess on this thread, so
// that its pixels and its errors are the CPU path's.
#include <nvjpeg.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/image_codec.h"
#include "datasets/nvjpeg.h"
#include "datasets/nvjpeg/crop_resize.cuh"
#include "datasets/resample.h"
#include "engine/core/error.h"

#define CONVOY_NVJPEG_CUDA_CHECK(call)                                                                   \
  do {                                                                                                   \
    const cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess)                                                                               \
      throw ::convoy::DeviceError(std::string(#call) + ": " + cudaGetErrorString(e_) + " at " __FILE__ \
                                  ":" CONVOY_STRINGIFY(__LINE__));                                       \
  } while (0)
#define CONVOY_NVJPEG_CHECK(call)                                                                   \
  do {                                                                                              \
    const nvjpegStatus_t s_ = (call);                                                               \
    if (s_ != NVJPEG_STATUS_SUCCESS)                                                                \
      throw ::convoy::DeviceError(std::string(#call) + ": nvJPEG status " + std::to_string(s_) + " at " \
                                  __FILE__ ":" CONVOY_STRINGIFY(__LINE__));                         \
  } while (0)

namespace convoy {
namespace nvjpeg {
namespace {

// Device memory for decoded batches, cached by size: a batch's block returns here when its
// tensor is dropped (after the uploader's copy of it is done), never through cudaFree, which
// would synchronize the device under the training step.
class DeviceBlocks final : public Allocator {
 public:
  explicit DeviceBlocks(int device_index) : device_index_(device_index) {}
  ~DeviceBlocks() override {
    for (auto& [bytes, blocks] : free_)
      for (void* p : blocks) cudaFree(p);
  }
  Device device() const override { return Device::cuda(device_index_); }
  void* allocate(size_t bytes) override {
    {
      std::lock_guard lock(mutex_);
      auto it = free_.find(bytes);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        return p;
      }
    }
    CONVOY_NVJPEG_CUDA_CHECK(cudaSetDevice(device_index_));
    void* p = nullptr;
    CONVOY_NVJPEG_CUDA_CHECK(cudaMalloc(&p, bytes == 0 ? 1 : bytes));
    return p;
  }
  void deallocate(void* ptr, size_t bytes) override {
    std::lock_guard lock(mutex_);
    free_[bytes].push_back(ptr);
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    CONVOY_NVJPEG_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  }
  void copy_from_host(void* dst, const void* src, size_t bytes) override {
    CONVOY_NVJPEG_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  }
  void copy_on_device(void* dst, const void* src, size_t bytes) override {
    CONVOY_NVJPEG_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
  }
  void fill_zero(void* ptr, size_t bytes) override { CONVOY_NVJPEG_CUDA_CHECK(cudaMemset(ptr, 0, bytes)); }

 private:
  int device_index_;
  std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_;
};

// Memory that grows to the largest need and is reused; `pinned` for host staging.
struct Buffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  bool pinned = false;
  void reserve(size_t need) {
    if (need <= bytes) return;
    release();
    need += need / 4;
    if (pinned)
      CONVOY_NVJPEG_CUDA_CHECK(cudaMallocHost(&ptr, need));
    else
      CONVOY_NVJPEG_CUDA_CHECK(cudaMalloc(&ptr, need));
    bytes = need;
  }
  void release() {
    if (ptr) pinned ? cudaFreeHost(ptr) : cudaFree(ptr);
    ptr = nullptr;
    bytes = 0;
  }
};

// What one caller of decode() works with; the decoder keeps one per concurrent worker.
struct Context {
  nvjpegJpegState_t state = nullptr;
  nvjpegJpegStream_t parsed = nullptr;
  cudaStream_t stream = nullptr;
  int initialized_batch = -1;  // nvjpegDecodeBatchedInitialize's batch size, -1 = none
  Buffer decoded;              // the batch's decoded RGB images, device
  Buffer jobs_host{nullptr, 0, true}, jobs_device;
  Buffer staging{nullptr, 0, true};  // CPU-decoded samples on their way to the batch
  ~Context() {
    if (stream) cudaStreamSynchronize(stream);
    decoded.release();
    jobs_host.release();
    jobs_device.release();
    staging.release();
    if (parsed) nvjpegJpegStreamDestroy(parsed);
    if (state) nvjpegJpegStateDestroy(state);
    if (stream) cudaStreamDestroy(stream);
  }
};

size_t align_up(size_t v) { return (v + 255) & ~size_t{255}; }

// A JPEG whose last bytes hold no end-of-image marker is truncated: the CPU path refuses it,
// the GPU decoders may not, so it goes to the CPU for its error.
bool ends_with_eoi(std::span<const uint8_t> b) {
  const size_t from = b.size() > 64 ? b.size() - 64 : 0;
  for (size_t i = b.size(); i-- > from + 1;)
    if (b[i - 1] == 0xFF && b[i] == 0xD9) return true;
  return false;
}

class NvjpegBatchDecoder final : public BatchDecoder {
 public:
  NvjpegBatchDecoder(int device_index, bool want_hardware)
      : device_index_(device_index), blocks_(std::make_shared<DeviceBlocks>(device_index)) {
    CONVOY_NVJPEG_CUDA_CHECK(cudaSetDevice(device_index_));
    if (want_hardware &&
        nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, NVJPEG_FLAGS_DEFAULT, &handle_) == NVJPEG_STATUS_SUCCESS) {
      hardware_ = true;
    } else {
      handle_ = nullptr;
      CONVOY_NVJPEG_CHECK(nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT, nullptr, nullptr, NVJPEG_FLAGS_DEFAULT, &handle_));
    }
    int major = 0, minor = 0;
    nvjpegGetProperty(MAJOR_VERSION, &major);
    nvjpegGetProperty(MINOR_VERSION, &minor);
    describe_ = "nvJPEG " + std::to_string(major) + "." + std::to_string(minor) + " (" +
                (hardware_ ? "hardware" : "default") + " backend) on cuda:" + std::to_string(device_index_);
  }
  ~NvjpegBatchDecoder() override {
    cudaSetDevice(device_index_);
    contexts_.clear();
    if (handle_) nvjpegDestroy(handle_);
  }

  Result decode(std::span<const EncodedSample> samples, const Preprocess& p, SampleMode mode, bool skip_bad) override;
  Counts counts() const override { return {device_count_.load(), cpu_count_.load()}; }
  std::string describe() const override { return describe_; }

 private:
  std::unique_ptr<Context> acquire() {
    {
      std::lock_guard lock(mutex_);
      if (!contexts_.empty()) {
        std::unique_ptr<Context> c = std::move(contexts_.back());
        contexts_.pop_back();
        return c;
      }
    }
    auto c = std::make_unique<Context>();
    CONVOY_NVJPEG_CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CONVOY_NVJPEG_CHECK(nvjpegJpegStateCreate(handle_, &c->state));
    CONVOY_NVJPEG_CHECK(nvjpegJpegStreamCreate(handle_, &c->parsed));
    return c;
  }
  void release(std::unique_ptr<Context> c) {
    std::lock_guard lock(mutex_);
    contexts_.push_back(std::move(c));
  }
  // Whether nvJPEG takes this sample: a baseline-decodable colour JPEG; else the CPU path.
  bool for_device(const EncodedSample& s, const ImageHeader& header, Context& ctx) const;
  // nvJPEG's batched decode of `ids` into ctx.decoded; false (and the state reset) on failure.
  bool decode_on_device(Context& ctx, std::span<const EncodedSample> samples, const std::vector<size_t>& ids,
                        const std::vector<ImageHeader>& headers, std::vector<nvjpegImage_t>& images);

  int device_index_;
  std::shared_ptr<DeviceBlocks> blocks_;
  nvjpegHandle_t handle_ = nullptr;
  bool hardware_ = false;
  std::string describe_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Context>> contexts_;
  std::atomic<int64_t> device_count_{0}, cpu_count_{0};
};

bool NvjpegBatchDecoder::for_device(const EncodedSample& s, const ImageHeader& header, Context& ctx) const {
  if (header.format != ImageFormat::jpeg || !ends_with_eoi(s.bytes)) return false;
  int components = 0;
  nvjpegChromaSubsampling_t subsampling = NVJPEG_CSS_UNKNOWN;
  int widths[NVJPEG_MAX_COMPONENT] = {}, heights[NVJPEG_MAX_COMPONENT] = {};
  if (nvjpegGetImageInfo(handle_, s.bytes.data(), s.bytes.size(), &components, &subsampling, widths, heights) !=
      NVJPEG_STATUS_SUCCESS)
    return false;
  if (components != 3 || widths[0] != header.width || heights[0] != header.height) return false;
  if (subsampling != NVJPEG_CSS_444 && subsampling != NVJPEG_CSS_422 && subsampling != NVJPEG_CSS_420 &&
      subsampling != NVJPEG_CSS_440)
    return false;
  if (!hardware_) return true;
  int unsupported = 1;  // nvjpegDecodeBatchedSupported sets 0 when the hardware can decode it
  if (nvjpegJpegStreamParseHeader(handle_, s.bytes.data(), s.bytes.size(), ctx.parsed) != NVJPEG_STATUS_SUCCESS ||
      nvjpegDecodeBatchedSupported(handle_, ctx.parsed, &unsupported) != NVJPEG_STATUS_SUCCESS)
    return false;
  return unsupported == 0;
}

bool NvjpegBatchDecoder::decode_on_device(Context& ctx, std::span<const EncodedSample> samples,
                                          const std::vector<size_t>& ids, const std::vector<ImageHeader>& headers,
                                          std::vector<nvjpegImage_t>& images) {
  if (ids.empty()) return true;
  size_t total = 0;
  for (size_t k : ids) total += align_up(static_cast<size_t>(headers[k].width * headers[k].height * 3));
  ctx.decoded.reserve(total);  // the stream is idle here: decode() ends with a synchronize
  std::vector<const unsigned char*> data;
  std::vector<size_t> lengths;
  images.assign(ids.size(), nvjpegImage_t{});
  size_t offset = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const EncodedSample& s = samples[ids[i]];
    data.push_back(s.bytes.data());
    lengths.push_back(s.bytes.size());
    images[i].channel[0] = static_cast<unsigned char*>(ctx.decoded.ptr) + offset;
    images[i].pitch[0] = static_cast<size_t>(headers[ids[i]].width * 3);
    offset += align_up(static_cast<size_t>(headers[ids[i]].width * headers[ids[i]].height * 3));
  }
  const int n = static_cast<int>(ids.size());
  if (ctx.initialized_batch != n) {
    if (nvjpegDecodeBatchedInitialize(handle_, ctx.state, n, 1, NVJPEG_OUTPUT_RGBI) != NVJPEG_STATUS_SUCCESS) {
      ctx.initialized_batch = -1;
      return false;
    }
    ctx.initialized_batch = n;
  }
  if (nvjpegDecodeBatched(handle_, ctx.state, data.data(), lengths.data(), images.data(), ctx.stream) !=
      NVJPEG_STATUS_SUCCESS) {
    ctx.initialized_batch = -1;  // "also use to reset failed batches"
    cudaStreamSynchronize(ctx.stream);
    return false;
  }
  return true;
}

BatchDecoder::Result NvjpegBatchDecoder::decode(std::span<const EncodedSample> samples, const Preprocess& p,
                                                SampleMode mode, bool skip_bad) {
  CONVOY_NVJPEG_CUDA_CHECK(cudaSetDevice(device_index_));
  std::unique_ptr<Context> lease = acquire();
  Context& ctx = *lease;
  const size_t count = samples.size();
  const int64_t row = p.channels * p.height * p.width;
  // 1. Which samples nvJPEG decodes; anything unreadable is the CPU path's to report.
  std::vector<ImageHeader> headers(count);
  std::vector<bool> on_device(count, false);
  std::vector<size_t> device_ids;
  for (size_t k = 0; k < count; ++k) {
    try {
      headers[k] = read_image_header(samples[k].bytes, samples[k].name);
    } catch (const InputError&) {
      continue;
    }
    on_device[k] = (p.channels == 1 || p.channels == 3) && for_device(samples[k], headers[k], ctx);
    if (on_device[k]) device_ids.push_back(k);
  }
  // 2. The batched decode; a batch nvJPEG refuses goes to the CPU whole, which names the bad file.
  std::vector<nvjpegImage_t> images;
  if (!decode_on_device(ctx, samples, device_ids, headers, images)) {
    for (size_t k : device_ids) on_device[k] = false;
    device_ids.clear();
  }
  // 3. The others on this thread, as the CPU path decodes them, into pinned staging.
  ctx.staging.reserve(static_cast<size_t>(row) * std::max<size_t>(count, 1));
  auto* staging = static_cast<uint8_t*>(ctx.staging.ptr);
  Result result;
  std::vector<bool> bad(count, false);
  int64_t on_cpu = 0;
  for (size_t k = 0; k < count; ++k) {
    if (on_device[k]) continue;
    try {
      try {
        decode_preprocess(samples[k].bytes, samples[k].name, p, mode, samples[k].seed, staging + k * row);
      } catch (const BadSampleError&) {
        throw;
      } catch (const InputError& e) {
        throw BadSampleError(e.what());
      }
      ++on_cpu;
    } catch (const BadSampleError&) {
      if (!skip_bad) {
        cudaStreamSynchronize(ctx.stream);
        release(std::move(lease));
        throw;
      }
      bad[k] = true;
      result.skipped.push_back(k);
    }
  }
  // 4. The batch: rows in sample order, the bad ones left out.
  const auto kept = static_cast<int64_t>(count - result.skipped.size());
  result.images = Tensor({kept, p.channels, p.height, p.width}, DType::u8, blocks_);
  auto* out = static_cast<uint8_t*>(result.images.raw());
  ctx.jobs_host.reserve(sizeof(CropResizeJob) * std::max<size_t>(device_ids.size(), 1));
  ctx.jobs_device.reserve(sizeof(CropResizeJob) * std::max<size_t>(device_ids.size(), 1));
  auto* jobs = static_cast<CropResizeJob*>(ctx.jobs_host.ptr);
  int64_t r = 0;
  size_t d = 0;
  for (size_t k = 0; k < count; ++k) {
    if (bad[k]) continue;
    uint8_t* dst = out + r * row;
    ++r;
    if (!on_device[k]) {
      CONVOY_NVJPEG_CUDA_CHECK(
          cudaMemcpyAsync(dst, staging + k * row, static_cast<size_t>(row), cudaMemcpyHostToDevice, ctx.stream));
      continue;
    }
    const ImageHeader& h = headers[k];
    const CropBox box = sample_box(h.width, h.height, p, mode, samples[k].seed);
    jobs[d] = CropResizeJob{images[d].channel[0], static_cast<int64_t>(images[d].pitch[0]),
                            static_cast<int32_t>(h.width), static_cast<int32_t>(h.height),
                            box.x, box.y, box.width, box.height, dst,
                            resample_vertical_first(h.width, h.height, box, p.width, p.height) ? 1 : 0};
    ++d;
  }
  if (d > 0) {
    CONVOY_NVJPEG_CUDA_CHECK(
        cudaMemcpyAsync(ctx.jobs_device.ptr, jobs, sizeof(CropResizeJob) * d, cudaMemcpyHostToDevice, ctx.stream));
    launch_crop_resize(static_cast<const CropResizeJob*>(ctx.jobs_device.ptr), static_cast<int>(d),
                       static_cast<int>(p.width), static_cast<int>(p.height), static_cast<int>(p.channels),
                       ctx.stream);
    CONVOY_NVJPEG_CUDA_CHECK(cudaGetLastError());
  }
  // Ready when returned: the tensor may be copied on any stream, and the staging, jobs and
  // decoded images are free for this context's next batch.
  CONVOY_NVJPEG_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  device_count_ += static_cast<int64_t>(d);
  cpu_count_ += on_cpu;
  release(std::move(lease));
  return result;
}

}  // namespace
}  // namespace nvjpeg

std::string nvjpeg_unavailable_reason() { return {}; }

std::shared_ptr<BatchDecoder> make_nvjpeg_batch_decoder(int device_index, bool hardware) {
  return std::make_shared<nvjpeg::NvjpegBatchDecoder>(device_index, hardware);
}

}  // namespace convoy
