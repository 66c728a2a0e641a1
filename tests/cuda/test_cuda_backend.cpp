// The CUDA backend beyond op values (those are tests/ops/: every case against the float64
// reference and the CPU): its allocator, what it says about itself, repeatability, its
// errors, and the calls only it accepts. Every test that needs a GPU skips, with the reason,
// where none is usable.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/backends/cuda/cuda_allocator.h"
#include "engine/backends/cuda/cudnn_algo_pick.h"
#include "engine/core/error.h"
#include "tests/ops/op_cases.h"
#include "tests/ops/test_backends.h"

using namespace convoy;
using optest::compare;
using optest::device_tensor;
using optest::poisoned;
using optest::random_values;
using optest::read;
using ref::Vec;

namespace {

Backend& gpu() { return optest::shared_backend(optest::cuda_test_backends().front()); }

Conv2dParams same_3x3() {
  Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  return p;
}

Pool2dParams max_2x2() { return Pool2dParams{}; }  // max, kernel 2, stride 2

#define SKIP_WITHOUT_GPU() \
  if (const std::string why = cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why

// ---- algorithm choice -----------------------------------------------------------------------

// f32 plans pass over FFT and non-fused Winograd even when a benchmark ranks them first (under
// load one did, and a 5x5 data gradient came out 2e-3 off the reference), and take one only
// when nothing else is usable; the other filters hold either way. Needs no GPU: the lists are
// made here.
TEST(CudaBackend, ExactPlansPassOverTransformBasedConvolutionAlgorithms) {
  auto perf = [](cudnnConvolutionBwdDataAlgo_t algo, size_t memory, bool det) {
    cudnnConvolutionBwdDataAlgoPerf_t p{};
    p.algo = algo;
    p.status = CUDNN_STATUS_SUCCESS;
    p.memory = memory;
    p.determinism = det ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC;
    return p;
  };
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> list = {
      perf(CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING, 100, true),
      perf(CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED, 100, true),
      perf(CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, 0, false),
      perf(CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, 5000, true),
  };
  const int n = static_cast<int>(list.size());
  using cuda::pick_algo;
  EXPECT_EQ(pick_algo(list, n, false, 1000, false)->algo, CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING);
  EXPECT_EQ(pick_algo(list, n, false, 1000, true)->algo, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0);
  EXPECT_EQ(pick_algo(list, n, true, 10000, true)->algo, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1);
  EXPECT_EQ(pick_algo(list, n, true, 1000, true), nullptr);  // then choose_algorithm asks again, not exact
  EXPECT_EQ(pick_algo(list, 2, false, 1000, true), nullptr);  // only the first `count` entries
  list[0].status = CUDNN_STATUS_NOT_SUPPORTED;
  EXPECT_EQ(pick_algo(list, n, false, 1000, false)->algo, CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED);
  EXPECT_TRUE(cuda::transform_based(CUDNN_CONVOLUTION_FWD_ALGO_FFT));
  EXPECT_TRUE(cuda::transform_based(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED));
  EXPECT_FALSE(cuda::transform_based(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD));  // fused 3x3: near exact
  EXPECT_FALSE(cuda::transform_based(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM));
}

// ---- repeatability --------------------------------------------------------------------------

// The deterministic configuration (what the gradient checks use: f32, nchw) gives the
// reference's values and the same bits twice (backward weights is where cuDNN's fast
// algorithms sum in a varying order).
TEST(CudaBackend, DeterministicBackendRepeatsBitForBit) {
  SKIP_WITHOUT_GPU();
  Backend& be = optest::shared_backend(optest::cuda_deterministic_backend());
  const optest::OpCase* c = nullptr;
  for (const optest::OpCase& k : optest::all_cases())
    if (k.name == "conv2d_backward_weights/resnet_like_3x3") c = &k;
  ASSERT_NE(c, nullptr);
  for (const optest::Variant v : {optest::Variant{DType::f32, Layout::nchw}}) {
    SCOPED_TRACE(optest::variant_str(v));
    optest::Prepared p = c->prepare(be, v, v.dtype);
    p.run();
    be.synchronize();
    const optest::Outputs first = p.outputs();
    const optest::Outputs want = c->reference(v, v.dtype);
    ASSERT_EQ(first.size(), want.size());
    EXPECT_EQ(compare(first[0].values, want[0].values, c->tol.of(v.dtype, be.device())), "");
    p.run();
    be.synchronize();
    EXPECT_EQ(compare(p.outputs()[0].values, first[0].values, 0), "") << "two deterministic runs differ";
  }
}

// ---- what only the CUDA backend accepts -----------------------------------------------------

// relu and leaky relu (alpha > 0) keep their input's sign, so the backward may read y when x
// is gone (the CPU's oneDNN backward needs x).
TEST(CudaBackend, ReluBackwardFromY) {
  SKIP_WITHOUT_GPU();
  Backend& be = gpu();
  const Shape s{3, 5, 7, 2};
  for (DType dt : {DType::f32, DType::bf16}) {
    for (auto [kind, alpha] : {std::pair{Activation::relu, 0.0f}, {Activation::leaky_relu, 0.1f}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (kind == Activation::relu ? " relu" : " leaky_relu"));
      const Vec x = random_values(s, 41, dt, -3.0, 3.0), dy = random_values(s, 42, dt);
      Tensor xg = device_tensor(be, x, s, dt), dyg = device_tensor(be, dy, s, dt), yg = poisoned(be, s, dt);
      be.ops().activation_forward(kind, alpha, xg, yg);
      Tensor dx = poisoned(be, s, dt);
      be.ops().activation_backward(kind, alpha, Tensor(), yg, dyg, dx);
      EXPECT_EQ(compare(read(dx), ref::activation_backward(kind, alpha, x, dy), dt == DType::f32 ? 1e-5 : 2e-2), "");
    }
  }
}

// Evaluation wants neither the gradient nor the count (the CPU's op always counts).
TEST(CudaBackend, CrossEntropyWithoutGradientOrCount) {
  SKIP_WITHOUT_GPU();
  Backend& be = gpu();
  for (DType dt : {DType::f32, DType::bf16})
    for (auto [n, c, smoothing] : {std::tuple<int64_t, int64_t, float>{8, 10, 0.1f}, {1, 37, 0.0f}, {64, 1000, 0.1f},
                                   {300, 3, 0.2f}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + std::to_string(n) + "x" + std::to_string(c));
      const Vec logits = random_values({n, c}, 101, dt, -4.0, 4.0);
      const std::vector<int32_t> labels = ref::random_ints(n, static_cast<int32_t>(c), 102);
      Tensor lg = device_tensor(be, logits, {n, c}, dt), lab = be.upload(Tensor::from_ints(labels, {n}));
      Tensor loss = poisoned(be, {1}, DType::f32), none1, none2;
      be.ops().softmax_cross_entropy(lg, lab, smoothing, loss, none1, none2);
      EXPECT_EQ(compare(read(loss), {ref::softmax_cross_entropy(logits, n, c, labels, smoothing).loss}, 1e-5), "");
    }
}

TEST(CudaBackend, InvalidLabelGivesNaNNotACrash) {
  SKIP_WITHOUT_GPU();
  Backend& be = gpu();
  Tensor lg = device_tensor(be, random_values({2, 4}, 103, DType::f32), {2, 4}, DType::f32);
  Tensor lab = be.upload(Tensor::from_ints({1, 9}, {2}));
  Tensor loss = poisoned(be, {1}, DType::f32), none1, none2;
  be.ops().softmax_cross_entropy(lg, lab, 0.f, loss, none1, none2);
  EXPECT_TRUE(std::isnan(read(loss)[0]));
}

// ---- allocator and backend ------------------------------------------------------------------
TEST(CudaAllocator, BucketSizes) {  // pure arithmetic: runs without a GPU
  using cuda::CudaAllocator;
  EXPECT_EQ(CudaAllocator::bucket_size(0), 512u);
  EXPECT_EQ(CudaAllocator::bucket_size(1), 512u);
  EXPECT_EQ(CudaAllocator::bucket_size(513), 1024u);
  EXPECT_EQ(CudaAllocator::bucket_size(size_t(1) << 20), size_t(1) << 20);
  EXPECT_EQ(CudaAllocator::bucket_size((size_t(1) << 20) + 1), size_t(5) << 18);
  EXPECT_EQ(CudaAllocator::bucket_size(size_t(3) << 30), size_t(3) << 30);
  size_t previous = 0;
  for (size_t b = 1; b < (size_t(1) << 34); b = b * 3 / 2 + 1) {
    const size_t s = CudaAllocator::bucket_size(b);
    EXPECT_GE(s, b);
    EXPECT_LE(s, b + b / 4 + 512);  // at most 25% (or 512 bytes) of waste
    EXPECT_GE(s, previous);
    previous = s;
  }
}

TEST(CudaAllocator, SteadyStateTrainingStepCallsNoCudaMalloc) {
  SKIP_WITHOUT_GPU();
  Backend& be = gpu();
  auto* alloc = dynamic_cast<cuda::CudaAllocator*>(be.allocator().get());
  ASSERT_NE(alloc, nullptr);
  const Conv2dParams p = same_3x3();
  const Shape xs = {8, 16, 12, 12}, ws = {16, 16, 3, 3};
  const Vec xv = random_values(xs, 151, DType::f32), wv = random_values(ws, 152, DType::f32);
  const Vec fwv = random_values({10, 16 * 36}, 153, DType::f32, -0.1, 0.1);
  const Tensor labels_host = Tensor::from_ints({1, 2, 3, 4, 5, 6, 7, 8}, {8});
  // One small training step: conv, batch norm, relu, pool, linear, loss, backward, SGD.
  auto step = [&] {
    Ops& ops = be.ops();
    Tensor x = device_tensor(be, xv, xs, DType::f32), w = device_tensor(be, wv, ws, DType::f32);
    Tensor b = be.zeros({16}, DType::f32), y = be.empty(xs, DType::f32);
    ops.conv2d_forward(p, x, w, b, y);
    Tensor gamma = be.empty({16}, DType::f32), beta = be.zeros({16}, DType::f32);
    ops.fill(gamma, 1.f);
    Tensor rm = be.zeros({16}, DType::f32), rv = be.zeros({16}, DType::f32);
    Tensor z = be.empty(xs, DType::f32), sm = be.empty({16}, DType::f32), si = be.empty({16}, DType::f32);
    ops.batchnorm_forward_train(y, gamma, beta, 0.1f, 1e-5f, rm, rv, z, sm, si);
    Tensor r = be.empty(xs, DType::f32);
    ops.activation_forward(Activation::relu, 0.f, z, r);
    Tensor pooled = be.empty({8, 16, 6, 6}, DType::f32), pws;
    ops.pool2d_forward(max_2x2(), r, pooled, pws, true);
    Tensor flat = pooled.reshape({8, 16 * 36});
    Tensor fw = device_tensor(be, fwv, {10, 16 * 36}, DType::f32), fb = be.zeros({10}, DType::f32);
    Tensor logits = be.empty({8, 10}, DType::f32);
    ops.linear_forward(flat, fw, fb, logits);
    Tensor labels = be.upload(labels_host);
    Tensor loss = be.empty({1}, DType::f32), dl = be.empty({8, 10}, DType::f32), hits = be.empty({1}, DType::i32);
    ops.softmax_cross_entropy(logits, labels, 0.1f, loss, dl, hits);
    Tensor dflat = be.empty({8, 16 * 36}, DType::f32), dfw = be.empty({10, 16 * 36}, DType::f32), dfb = be.empty({10}, DType::f32);
    ops.linear_backward(flat, fw, dl, dflat, dfw, dfb);
    Tensor dr = be.empty(xs, DType::f32), dz = be.empty(xs, DType::f32);
    ops.pool2d_backward(max_2x2(), r, pooled, dflat.reshape({8, 16, 6, 6}), pws, dr);
    ops.activation_backward(Activation::relu, 0.f, z, r, dr, dz);
    Tensor dy = be.empty(xs, DType::f32), dg = be.empty({16}, DType::f32), dbeta = be.empty({16}, DType::f32);
    ops.batchnorm_backward(y, dz, gamma, sm, si, dy, dg, dbeta);
    Tensor dx = be.empty(xs, DType::f32), dw = be.empty(ws, DType::f32), db = be.empty({16}, DType::f32);
    ops.conv2d_backward_data(p, dy, w, dx);
    ops.conv2d_backward_weights(p, x, dy, dw, db);
    Tensor buf = be.zeros(ws, DType::f32);
    SgdSlot slot{&w, &dw, &buf, 1e-4f};
    ops.sgd_update(std::span<const SgdSlot>(&slot, 1), SgdHyper{});
    be.synchronize();
    return read(loss)[0];
  };
  const double first = step();
  EXPECT_TRUE(std::isfinite(first));
  const uint64_t mallocs = alloc->stats().cuda_mallocs;
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(step(), first, 1e-5 * std::fabs(first));
  EXPECT_EQ(alloc->stats().cuda_mallocs, mallocs) << "steady-state steps called cudaMalloc";
  EXPECT_GT(alloc->stats().cache_hits, 0u);
}

TEST(CudaAllocator, CopyToHostWaitsForQueuedWork) {
  SKIP_WITHOUT_GPU();
  Backend& be = gpu();
  const int64_t n = int64_t(1) << 26;  // 256 MiB: the kernels take a while
  Tensor t = be.empty({n}, DType::f32);
  be.ops().fill(t, 3.f);
  be.ops().add_inplace(t, t);
  be.ops().add_inplace(t, t);
  const std::vector<float> v = t.to_floats();  // no synchronize() first: the copy must wait
  int64_t wrong = 0;
  for (float f : v) wrong += f != 12.f;
  EXPECT_EQ(wrong, 0);
  // And a host-to-device copy followed by device work.
  Tensor h = Tensor::from_floats(std::vector<float>(1000, 2.5f), {1000});
  Tensor d = be.upload(h);
  be.ops().add_inplace(d, d);
  for (float f : d.to_floats()) ASSERT_EQ(f, 5.f);
}

TEST(CudaBackend, UnavailableReasonMatchesWhatHappens) {  // runs with or without a GPU
  const std::string why = cuda_unavailable_reason();
  EXPECT_EQ(why, cuda_unavailable_reason());
  const std::vector<std::string> lines = cuda_doctor_lines();
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  EXPECT_NE(all.find("cuDNN"), std::string::npos) << all;
  EXPECT_NE(all.find("cuBLAS"), std::string::npos) << all;
  if (!why.empty()) {
    try {
      make_cuda_backend(0, BackendOptions{});
      ADD_FAILURE() << "make_cuda_backend succeeded although: " << why;
    } catch (const DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
    EXPECT_NE(all.find(why), std::string::npos) << all;
  } else {
    auto be = make_cuda_backend(0, BackendOptions{});
    EXPECT_EQ(be->device(), Device::cuda(0));
    EXPECT_NE(be->describe().find("cuda:0"), std::string::npos) << be->describe();
    EXPECT_NE(be->describe().find("cuDNN"), std::string::npos) << be->describe();
    EXPECT_NE(all.find("cuda:0: "), std::string::npos) << all;
    EXPECT_THROW(make_cuda_backend(1000, BackendOptions{}), DeviceError);
    EXPECT_THROW(make_cuda_backend(-1, BackendOptions{}), DeviceError);
  }
}

TEST(CudaBackend, WrongDeviceOrShapeIsAnErrorNotACrash) {
  SKIP_WITHOUT_GPU();
  Backend& be = gpu();
  Tensor host_x = Tensor::zeros({2, 3});
  Tensor y = be.empty({2, 3}, DType::f32), wrong = be.empty({3, 2}, DType::f32);
  EXPECT_THROW(be.ops().add(host_x, y, y), InternalError);
  EXPECT_THROW(be.ops().add(y, wrong, y), InternalError);
  Tensor x4 = be.empty({1, 3, 8, 8}, DType::f32), w4 = be.empty({4, 3, 3, 3}, DType::f32);
  Tensor y_bad = be.empty({1, 4, 7, 7}, DType::f32), none;
  EXPECT_THROW(be.ops().conv2d_forward(same_3x3(), x4, w4, none, y_bad), InternalError);
}

}  // namespace
