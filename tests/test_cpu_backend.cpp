// The CPU backend beyond op values (those are tests/ops/: every case against the float64
// reference): what it says about itself, its primitive cache, its thread count, and its errors.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "engine/backends/backend.h"
#include "engine/core/error.h"
#include "tests/ops/op_cases.h"

namespace convoy {
namespace {

using optest::compare;
using optest::poisoned;
using optest::random_values;
using optest::read;
using ref::Vec;

Conv2dParams same_3x3() {
  Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  return p;
}

TEST(CpuBackend, DescribesItself) {
  auto be = make_cpu_backend({});
  EXPECT_TRUE(be->device().is_cpu());
  EXPECT_EQ(be->allocator().get(), cpu_allocator().get());
  const std::string d = be->describe();
  EXPECT_EQ(d.rfind("cpu: oneDNN ", 0), 0u) << d;
  EXPECT_NE(d.find(" threads, "), std::string::npos) << d;
  EXPECT_FALSE(cpu_doctor_lines().empty());
  be->synchronize();
}

TEST(CpuBackend, CachedPrimitivesKeepShapesApart) {
  // Interleave two shapes (and a bias / no-bias variant) on one backend, so a key collision
  // in the primitive cache shows up.
  auto be = make_cpu_backend({});
  const Conv2dParams p = same_3x3();
  for (int round = 0; round < 2; ++round)
    for (const Shape& xs : {Shape{2, 3, 8, 8}, Shape{2, 3, 6, 6}, Shape{1, 3, 8, 8}}) {
      const Shape ws{4, 3, 3, 3};
      const Shape ys = ref::conv2d_output_shape(p, xs, ws);
      const Vec x = random_values(xs, 161 + round, DType::f32), w = random_values(ws, 162, DType::f32);
      const Vec b = random_values({4}, 163, DType::f32);
      const bool bias = xs[2] == 8;
      Tensor y = poisoned(*be, ys, DType::f32);
      be->ops().conv2d_forward(p, ref::to_tensor(x, xs), ref::to_tensor(w, ws), bias ? ref::to_tensor(b, {4}) : Tensor(), y);
      const std::string diff = compare(read(y), ref::conv2d_forward(p, x, xs, w, ws, bias ? &b : nullptr), 1e-5);
      EXPECT_TRUE(diff.empty()) << shape_str(xs) << " round " << round << ": " << diff;
    }
}

TEST(CpuBackend, SingleThreadGivesTheSameResults) {
  BackendOptions one;
  one.threads = 1;
  auto single = make_cpu_backend(one);
  EXPECT_NE(single->describe().find(" 1 threads"), std::string::npos) << single->describe();
  const Conv2dParams p = same_3x3();
  const Shape xs{2, 3, 8, 8}, ws{4, 3, 3, 3}, ys{2, 4, 8, 8};
  const Vec x = random_values(xs, 171, DType::f32), w = random_values(ws, 172, DType::f32);
  Tensor y = poisoned(*single, ys, DType::f32);
  single->ops().conv2d_forward(p, ref::to_tensor(x, xs), ref::to_tensor(w, ws), Tensor(), y);
  EXPECT_EQ(compare(read(y), ref::conv2d_forward(p, x, xs, w, ws, nullptr), 1e-5), "");
  Tensor s = single->empty({100000}, DType::f32);  // above the loops' one-thread threshold
  single->ops().fill(s, 1.0f);
  single->ops().add_inplace(s, s);
  EXPECT_EQ(read(s), Vec(100000, 2.0));
}

// Max pooling's training forward records each window's argmax (one byte) for backward.
TEST(CpuBackend, MaxPoolTrainingKeepsItsArgmaxRecord) {
  auto be = make_cpu_backend({});
  Pool2dParams p;  // max 2x2, stride 2
  const Shape xs{2, 3, 8, 8};
  Tensor y = poisoned(*be, {2, 3, 4, 4}, DType::f32), workspace;
  be->ops().pool2d_forward(p, ref::to_tensor(optest::distinct_planes(xs, 11), xs), y, workspace, /*training=*/true);
  ASSERT_TRUE(workspace.defined());
  EXPECT_EQ(workspace.dtype(), DType::u8);
}

TEST(CpuBackend, BatchNormNeedsTwoValuesPerChannel) {
  auto be = make_cpu_backend({});
  const Tensor x = ref::to_tensor(ref::random_vec(3, 1), {1, 3});
  Tensor g = ref::to_tensor({1, 1, 1}, {3}), b = ref::to_tensor({0, 0, 0}, {3});
  Tensor rm = ref::to_tensor({0, 0, 0}, {3}), rv = ref::to_tensor({1, 1, 1}, {3});
  Tensor y = poisoned(*be, {1, 3}, DType::f32), m = poisoned(*be, {3}, DType::f32), s = poisoned(*be, {3}, DType::f32);
  EXPECT_THROW(be->ops().batchnorm_forward_train(x, g, b, 0.1f, 1e-5f, rm, rv, y, m, s), InputError);
}

TEST(CpuBackend, SoftmaxCrossEntropyRejectsBadLabels) {
  auto be = make_cpu_backend({});
  const Tensor logits = ref::to_tensor(ref::random_vec(6, 93), {2, 3});
  Tensor loss = poisoned(*be, {1}, DType::f32), dlogits = poisoned(*be, {2, 3}, DType::f32);
  Tensor correct = poisoned(*be, {1}, DType::i32);
  EXPECT_THROW(be->ops().softmax_cross_entropy(logits, Tensor::from_ints({0, 3}, {2}), 0.0f, loss, dlogits, correct),
               InputError);
  EXPECT_THROW(be->ops().softmax_cross_entropy(logits, Tensor::from_ints({-1, 0}, {2}), 0.0f, loss, dlogits, correct),
               InputError);
}

// The op tests check that every variant supports() refuses throws; this pins the message a
// user sees when a bf16 model meets the CPU.
TEST(CpuBackend, Bf16IsRejectedWithAClearError) {
  auto be = make_cpu_backend({});
  const Conv2dParams p;
  const Tensor x = ref::to_tensor(ref::random_vec(2 * 3 * 4 * 4, 181), {2, 3, 4, 4}, DType::bf16);
  const Tensor w = ref::to_tensor(ref::random_vec(4 * 3 * 3 * 3, 182), {4, 3, 3, 3}, DType::bf16);
  Tensor y = poisoned(*be, {2, 4, 2, 2}, DType::bf16);
  try {
    be->ops().conv2d_forward(p, x, w, Tensor(), y);
    FAIL() << "bf16 convolution on the CPU must throw";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("bf16 is a GPU precision"), std::string::npos) << e.what();
  }
  Tensor a = ref::to_tensor({1, 2}, {2}, DType::bf16);
  Tensor r = poisoned(*be, {2}, DType::bf16);
  EXPECT_THROW(be->ops().activation_forward(Activation::relu, 0, a, r), DeviceError);
}

TEST(CpuBackend, ShapeMismatchesAreInternalErrors) {
  auto be = make_cpu_backend({});
  const Conv2dParams p;
  const Tensor x = ref::to_tensor(ref::random_vec(2 * 3 * 4 * 4, 191), {2, 3, 4, 4});
  const Tensor w = ref::to_tensor(ref::random_vec(4 * 3 * 3 * 3, 192), {4, 3, 3, 3});
  Tensor wrong_y = poisoned(*be, {2, 4, 3, 3}, DType::f32);
  try {
    be->ops().conv2d_forward(p, x, w, Tensor(), wrong_y);
    FAIL() << "a wrong output shape must throw";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("(2, 4, 2, 2)"), std::string::npos) << e.what();
  }
  Tensor lw = ref::to_tensor(ref::random_vec(15, 193), {3, 5});
  Tensor lx = ref::to_tensor(ref::random_vec(8, 194), {2, 4});
  Tensor ly = poisoned(*be, {2, 3}, DType::f32);
  EXPECT_THROW(be->ops().linear_forward(lx, lw, Tensor(), ly), InternalError);
  Tensor a = poisoned(*be, {3}, DType::f32), b = poisoned(*be, {4}, DType::f32);
  EXPECT_THROW(be->ops().add(a, b, a), InternalError);
}

}  // namespace
}  // namespace convoy
