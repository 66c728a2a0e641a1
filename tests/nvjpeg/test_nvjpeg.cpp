// nvJPEG batch decoding (datasets/nvjpeg.h) against the CPU path (decode_preprocess) on the same
// files and seeds. Labelled `nvjpeg` and `cuda`; built everywhere, each GPU case skips with the
// reason where nvJPEG is not compiled in or no GPU is usable.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/image_codec.h"
#include "datasets/loader.h"
#include "datasets/nvjpeg.h"
#include "datasets/resample.h"
#include "engine/backends/backend.h"
#include "engine/core/error.h"
#include "temp_dir.h"

#ifdef CONVOY_HAVE_NVJPEG
#include "datasets/nvjpeg/crop_resize.cuh"
#endif

namespace convoy {
namespace {

std::string why_no_nvjpeg() {
  if (std::string why = nvjpeg_unavailable_reason(); !why.empty()) return why;
  return cuda_unavailable_reason();
}

#define SKIP_WITHOUT_NVJPEG() \
  if (const std::string why = why_no_nvjpeg(); !why.empty()) GTEST_SKIP() << why

// A photo-like (smooth, with some texture) RGB image, (height, width, 3) u8.
std::vector<uint8_t> smooth_image(int64_t width, int64_t height, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  const double fx = 2 + 6 * u(rng), fy = 2 + 6 * u(rng), phase = 6.28 * u(rng);
  std::vector<uint8_t> px(static_cast<size_t>(width * height * 3));
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x)
      for (int64_t c = 0; c < 3; ++c) {
        const double v = 128 + 60 * std::sin(fx * x / width * 6.28 + phase + c) * std::cos(fy * y / height * 6.28) +
                         40 * (static_cast<double>(x + y * c) / static_cast<double>(width + height * 2) - 0.5) +
                         8 * (u(rng) - 0.5);
        px[static_cast<size_t>((y * width + x) * 3 + c)] = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
      }
  return px;
}

struct Files {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<std::string> names;
  std::vector<EncodedSample> samples(uint64_t seed_base) const {
    std::vector<EncodedSample> out;
    for (size_t k = 0; k < bytes.size(); ++k) out.push_back({bytes[k], names[k], seed_base * 1000 + k});
    return out;
  }
};

// ImageNet-like colour JPEGs of 224 to 500 pixels a side (4:2:0, quality 90).
Files colour_jpegs(int count) {
  Files f;
  std::mt19937 rng(7);
  for (int k = 0; k < count; ++k) {
    const int64_t w = 224 + static_cast<int64_t>(rng() % 277), h = 224 + static_cast<int64_t>(rng() % 277);
    f.bytes.push_back(encode_jpeg(smooth_image(w, h, static_cast<uint32_t>(k)).data(), w, h, 3, 90));
    f.names.push_back("img" + std::to_string(k) + ".jpg");
  }
  return f;
}

Preprocess imagenet_preprocess(int64_t channels = 3) {
  Preprocess p;
  p.channels = channels;
  p.height = p.width = 224;
  p.resize = 256;
  p.random_resized_crop = true;
  return p;
}

std::vector<uint8_t> to_host(const Tensor& t) {
  const Tensor h = t.to(cpu_allocator());
  const auto* d = h.data<uint8_t>();
  return std::vector<uint8_t>(d, d + h.numel());
}

// The CPU path's rows for the same samples.
std::vector<uint8_t> cpu_batch(const std::vector<EncodedSample>& samples, const Preprocess& p, SampleMode mode) {
  const int64_t row = p.channels * p.height * p.width;
  std::vector<uint8_t> out(static_cast<size_t>(row) * samples.size());
  for (size_t k = 0; k < samples.size(); ++k)
    decode_preprocess(samples[k].bytes, samples[k].name, p, mode, samples[k].seed, out.data() + k * row);
  return out;
}

struct Diff {
  double mean = 0;
  int max = 0;
};
Diff diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  EXPECT_EQ(a.size(), b.size());
  Diff d;
  double sum = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const int e = std::abs(int(a[i]) - int(b[i]));
    sum += e;
    d.max = std::max(d.max, e);
  }
  d.mean = a.empty() ? 0 : sum / static_cast<double>(a.size());
  return d;
}

TEST(Nvjpeg, UnavailableSaysWhy) {
  if (!nvjpeg_unavailable_reason().empty()) {
    EXPECT_NE(nvjpeg_unavailable_reason().find("nvJPEG"), std::string::npos);
    EXPECT_THROW(make_nvjpeg_batch_decoder(0), DeviceError);
  } else {
    SUCCEED() << "nvJPEG is compiled in";
  }
}

// Colour JPEGs through nvJPEG + the GPU resampler against libjpeg-turbo + the CPU resampler,
// in train (random-resized crops) and eval (resize 256, centre 224) mode. The filter is the same
// to the bit; what differs is the decoders' IDCT and chroma upsampling and the CPU path's DCT
// scaling (1/2, 1/4 when a crop is at least twice the output): mean below 2 levels, max 40.
TEST(Nvjpeg, MatchesTheCpuPath) {
  SKIP_WITHOUT_NVJPEG();
  const Files files = colour_jpegs(24);
  auto decoder = make_nvjpeg_batch_decoder(0);
  for (SampleMode mode : {SampleMode::train, SampleMode::eval}) {
    for (int64_t channels : {3, 1}) {
      const Preprocess p = imagenet_preprocess(channels);
      const std::vector<EncodedSample> samples = files.samples(mode == SampleMode::train ? 1 : 2);
      const BatchDecoder::Result r = decoder->decode(samples, p, mode, false);
      ASSERT_TRUE(r.skipped.empty());
      ASSERT_EQ(r.images.shape(), (Shape{24, channels, 224, 224}));
      EXPECT_TRUE(r.images.device().is_cuda());
      const Diff d = diff(to_host(r.images), cpu_batch(samples, p, mode));
      EXPECT_LT(d.mean, 2.0) << (mode == SampleMode::train ? "train" : "eval") << " channels " << channels;
      EXPECT_LE(d.max, 40) << (mode == SampleMode::train ? "train" : "eval") << " channels " << channels;
    }
  }
  EXPECT_GE(decoder->counts().device, 4 * 24) << decoder->describe();
  EXPECT_EQ(decoder->counts().cpu, 0);
}

TEST(Nvjpeg, SameBytesEveryRun) {
  SKIP_WITHOUT_NVJPEG();
  const Files files = colour_jpegs(16);
  const std::vector<EncodedSample> samples = files.samples(3);
  const Preprocess p = imagenet_preprocess();
  auto a = make_nvjpeg_batch_decoder(0);
  auto b = make_nvjpeg_batch_decoder(0);
  const std::vector<uint8_t> first = to_host(a->decode(samples, p, SampleMode::train, false).images);
  EXPECT_EQ(first, to_host(a->decode(samples, p, SampleMode::train, false).images));
  EXPECT_EQ(first, to_host(b->decode(samples, p, SampleMode::train, false).images));
  // Another seed, other crops.
  EXPECT_NE(first, to_host(a->decode(files.samples(4), p, SampleMode::train, false).images));
}

// PNG and grey JPEGs go to the CPU path, whose pixels they then are exactly.
TEST(Nvjpeg, PngAndGreyFallBackToTheCpu) {
  SKIP_WITHOUT_NVJPEG();
  Files files = colour_jpegs(3);
  const std::vector<uint8_t> rgb = smooth_image(320, 240, 99);
  files.bytes.push_back(encode_png(rgb.data(), 320, 240, 3));
  files.names.push_back("img.png");
  std::vector<uint8_t> grey(320 * 240);
  for (size_t i = 0; i < grey.size(); ++i) grey[i] = rgb[i * 3];
  files.bytes.push_back(encode_jpeg(grey.data(), 320, 240, 1, 90));
  files.names.push_back("grey.jpg");
  auto decoder = make_nvjpeg_batch_decoder(0);
  const Preprocess p = imagenet_preprocess();
  const std::vector<EncodedSample> samples = files.samples(5);
  const std::vector<uint8_t> gpu = to_host(decoder->decode(samples, p, SampleMode::train, false).images);
  const std::vector<uint8_t> cpu = cpu_batch(samples, p, SampleMode::train);
  const size_t row = 3 * 224 * 224;
  EXPECT_TRUE(std::equal(gpu.begin() + 3 * row, gpu.end(), cpu.begin() + 3 * row));
  EXPECT_EQ(decoder->counts().cpu, 2);
  EXPECT_EQ(decoder->counts().device, 3);
}

// A truncated JPEG and a non-image: BadSampleError naming the file, or left out with skip_bad.
TEST(Nvjpeg, BadFilesAreNamedOrSkipped) {
  SKIP_WITHOUT_NVJPEG();
  Files files = colour_jpegs(4);
  files.bytes[1].resize(files.bytes[1].size() / 2);
  files.names[1] = "truncated.jpg";
  files.bytes[3] = std::vector<uint8_t>{'n', 'o', 't', ' ', 'a', 'n', ' ', 'i', 'm', 'a', 'g', 'e'};
  files.names[3] = "text.jpg";
  auto decoder = make_nvjpeg_batch_decoder(0);
  const Preprocess p = imagenet_preprocess();
  const std::vector<EncodedSample> samples = files.samples(6);
  try {
    decoder->decode(samples, p, SampleMode::train, false);
    FAIL() << "a truncated file was decoded";
  } catch (const BadSampleError& e) {
    EXPECT_NE(std::string(e.what()).find("truncated.jpg"), std::string::npos) << e.what();
  }
  const BatchDecoder::Result r = decoder->decode(samples, p, SampleMode::train, true);
  EXPECT_EQ(r.skipped, (std::vector<size_t>{1, 3}));
  ASSERT_EQ(r.images.dim(0), 2);
  const std::vector<EncodedSample> good = {samples[0], samples[2]};
  EXPECT_LT(diff(to_host(r.images), cpu_batch(good, p, SampleMode::train)).mean, 2.0);
}

// The loader with the decoder: the CPU loader's labels and order, its crops within the tolerance.
TEST(Nvjpeg, LoaderBatchesMatchTheCpuLoader) {
  SKIP_WITHOUT_NVJPEG();
  testing::TempDir dir("convoy-nvjpeg");
  const Files files = colour_jpegs(12);
  for (size_t k = 0; k < files.bytes.size(); ++k)
    testing::write_file(dir / ("train/c" + std::to_string(k % 3) + "/" + files.names[k]), files.bytes[k]);
  const auto data = load_image_folder(dir.path(), "train");
  LoaderOptions o;
  o.batch_size = 4;
  o.preprocess = imagenet_preprocess();
  o.workers = 2;
  DataLoader cpu(*data, o);
  o.batch_decoder = make_nvjpeg_batch_decoder(0);
  DataLoader gpu(*data, o);
  cpu.start_epoch(1);
  gpu.start_epoch(1);
  Batch a, b;
  int batches = 0;
  while (cpu.next(a)) {
    ASSERT_TRUE(gpu.next(b));
    EXPECT_TRUE(b.images.device().is_cuda());
    EXPECT_EQ(std::vector<int32_t>(a.labels.data<int32_t>(), a.labels.data<int32_t>() + 4),
              std::vector<int32_t>(b.labels.data<int32_t>(), b.labels.data<int32_t>() + 4));
    const std::vector<uint8_t> host(a.images.data<uint8_t>(), a.images.data<uint8_t>() + a.images.numel());
    EXPECT_LT(diff(to_host(b.images), host).mean, 2.0);
    ++batches;
  }
  EXPECT_EQ(batches, 3);
}

// nvJPEG and the CPU workers together (batch_decoder_slots): every batch, in order, with the
// CPU loader's labels, whichever decoder took it.
TEST(Nvjpeg, SharedWithTheCpuWorkers) {
  SKIP_WITHOUT_NVJPEG();
  testing::TempDir dir("convoy-nvjpeg");
  const Files files = colour_jpegs(24);
  for (size_t k = 0; k < files.bytes.size(); ++k)
    testing::write_file(dir / ("train/c" + std::to_string(k % 4) + "/" + files.names[k]), files.bytes[k]);
  const auto data = load_image_folder(dir.path(), "train");
  LoaderOptions o;
  o.batch_size = 2;
  o.preprocess = imagenet_preprocess();
  o.workers = 4;
  DataLoader cpu(*data, o);
  o.batch_decoder = make_nvjpeg_batch_decoder(0);
  o.batch_decoder_slots = 1;
  DataLoader shared(*data, o);
  cpu.start_epoch(0);
  shared.start_epoch(0);
  Batch a, b;
  int batches = 0;
  while (cpu.next(a)) {
    ASSERT_TRUE(shared.next(b));
    EXPECT_EQ(a.index, b.index);
    EXPECT_EQ(std::vector<int32_t>(a.labels.data<int32_t>(), a.labels.data<int32_t>() + 2),
              std::vector<int32_t>(b.labels.data<int32_t>(), b.labels.data<int32_t>() + 2));
    const std::vector<uint8_t> host(a.images.data<uint8_t>(), a.images.data<uint8_t>() + a.images.numel());
    EXPECT_LT(diff(to_host(b.images), host).mean, 2.0);
    ++batches;
  }
  EXPECT_EQ(batches, 12);
  EXPECT_GT(o.batch_decoder->counts().device, 0);
}

#ifdef CONVOY_HAVE_NVJPEG
// The GPU resampler alone against the CPU's (resample_bilinear) on the same pixels: equal to the
// byte, for shrinking, enlarging, fractional boxes, boxes past the edges, colour and grey.
TEST(Nvjpeg, CropResizeKernelEqualsTheCpuResampler) {
  if (const std::string why = cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const int64_t w = 333, h = 250;
  std::vector<uint8_t> src(static_cast<size_t>(w * h * 3));
  std::mt19937 rng(11);
  for (auto& v : src) v = static_cast<uint8_t>(rng());  // noise: the hardest case for rounding
  void* d_src = nullptr;
  ASSERT_EQ(cudaMalloc(&d_src, src.size()), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_src, src.data(), src.size(), cudaMemcpyHostToDevice), cudaSuccess);
  const std::vector<CropBox> boxes = {{0, 0, 333, 250}, {10.5, 3.25, 200.75, 150.5}, {100, 50, 40, 30},
                                      {-20.5, -10, 373, 270}, {0, 0, 333, 1}, {300, 200, 33, 50}};
  for (int64_t channels : {3, 1})
    for (const auto& [ow, oh] : {std::pair<int64_t, int64_t>{224, 224}, {64, 48}, {7, 300}}) {
      const int64_t row = channels * ow * oh;
      void* d_out = nullptr;
      void* d_jobs = nullptr;
      ASSERT_EQ(cudaMalloc(&d_out, row * boxes.size()), cudaSuccess);
      std::vector<nvjpeg::CropResizeJob> jobs;
      for (size_t k = 0; k < boxes.size(); ++k)
        jobs.push_back({static_cast<const uint8_t*>(d_src), w * 3, static_cast<int32_t>(w), static_cast<int32_t>(h),
                        boxes[k].x, boxes[k].y, boxes[k].width, boxes[k].height,
                        static_cast<uint8_t*>(d_out) + k * row,
                        resample_vertical_first(w, h, boxes[k], ow, oh) ? 1 : 0});
      ASSERT_EQ(cudaMalloc(&d_jobs, sizeof(nvjpeg::CropResizeJob) * jobs.size()), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(d_jobs, jobs.data(), sizeof(nvjpeg::CropResizeJob) * jobs.size(), cudaMemcpyHostToDevice),
                cudaSuccess);
      nvjpeg::launch_crop_resize(static_cast<const nvjpeg::CropResizeJob*>(d_jobs), static_cast<int>(jobs.size()),
                                 static_cast<int>(ow), static_cast<int>(oh), static_cast<int>(channels), nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<uint8_t> gpu(static_cast<size_t>(row) * boxes.size());
      ASSERT_EQ(cudaMemcpy(gpu.data(), d_out, gpu.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      cudaFree(d_out);
      cudaFree(d_jobs);
      std::vector<uint8_t> gray(static_cast<size_t>(w * h));
      rgb_to_gray(src.data(), src.data() + 1, src.data() + 2, 3, w * h, gray.data());
      for (size_t k = 0; k < boxes.size(); ++k) {
        std::vector<uint8_t> cpu(static_cast<size_t>(row));
        if (channels == 3)
          resample_bilinear(src.data(), w, h, 3, PixelLayout::interleaved, boxes[k], ow, oh, cpu.data(), PixelLayout::planar);
        else
          resample_bilinear(gray.data(), w, h, 1, PixelLayout::interleaved, boxes[k], ow, oh, cpu.data(), PixelLayout::planar);
        const std::vector<uint8_t> one(gpu.begin() + static_cast<int64_t>(k) * row, gpu.begin() + static_cast<int64_t>(k + 1) * row);
        const Diff d = diff(one, cpu);
        EXPECT_EQ(d.max, 0) << "box " << k << " to " << ow << "x" << oh << ", " << channels << " channels, mean "
                            << d.mean;
      }
    }
  cudaFree(d_src);
}
#endif

}  // namespace
}  // namespace convoy
