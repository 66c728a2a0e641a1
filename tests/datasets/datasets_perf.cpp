// datasets_perf: decode_preprocess timed on one 500x375 quality-90 JPEG (an ImageNet-sized
// photo) to 224x224 RGB, in train mode (RandomResizedCrop, a new box each iteration) and eval
// mode (Resize(256) + CenterCrop(224)); items/s is images per second on one core.
//
//   datasets_perf --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "datasets/image_codec.h"
#include "datasets/preprocess.h"

namespace {

// A photo-like picture: smooth gradients with texture, so the JPEG has realistic detail.
std::vector<uint8_t> jpeg_500x375() {
  const int64_t w = 500, h = 375;
  std::vector<uint8_t> px(static_cast<size_t>(w * h * 3));
  uint32_t s = 1;
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t c = 0; c < 3; ++c) {
        s = s * 1664525u + 1013904223u;
        const double v = 120 + 70 * std::sin(0.021 * x * (c + 1) + 0.017 * y) + 30 * std::cos(0.11 * y - 0.07 * x) +
                         static_cast<double>(s >> 28);
        px[(y * w + x) * 3 + c] = static_cast<uint8_t>(std::lround(std::fmin(255.0, std::fmax(0.0, v))));
      }
  return convoy::encode_jpeg(px.data(), w, h, 3, 90);
}

void decode_preprocess_224(benchmark::State& state, convoy::SampleMode mode) {
  const std::vector<uint8_t> jpeg = jpeg_500x375();
  convoy::Preprocess p;
  p.channels = 3;
  p.height = p.width = 224;
  p.resize = 256;
  p.random_resized_crop = true;
  std::vector<uint8_t> out(3 * 224 * 224);  // (C, H, W) u8
  uint64_t seed = 0;
  for (auto _ : state) {
    convoy::decode_preprocess(jpeg, "bench.jpg", p, mode, seed++, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["jpeg_bytes"] = static_cast<double>(jpeg.size());
}

}  // namespace

BENCHMARK_CAPTURE(decode_preprocess_224, train_random_resized_crop, convoy::SampleMode::train)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(decode_preprocess_224, eval_resize256_center224, convoy::SampleMode::eval)
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
