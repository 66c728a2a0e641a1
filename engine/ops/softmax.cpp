#include "engine/ops/softmax.h"

#include "engine/ops/op_check.h"

namespace convoy {

void check_softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float smoothing,
                                 const Tensor& loss, const Tensor& dlogits, const Tensor& correct,
                                 Device device) {
  const OpCheck c("softmax_cross_entropy", device);
  c.floating(logits, "logits").that(logits.ndim() == 2 && logits.layout() == Layout::nchw, [&] {
    return "logits must be (N, C), got " + describe(logits);
  });
  const int64_t n = logits.dim(0), classes = logits.dim(1);
  c.that(n > 0 && classes > 0, [&] { return "empty logits " + describe(logits); });
  c.here(labels, "labels").that(labels.dtype() == DType::i32 && labels.numel() == n, [&] {
    return "labels must be (N) I32, got " + describe(labels);
  });
  c.f32(loss, 1, "loss");
  c.that(smoothing >= 0.f && smoothing <= 1.f,
         [&] { return "label smoothing must lie in [0, 1], got " + std::to_string(smoothing); });
  if (dlogits.defined()) c.here(dlogits, "dlogits").like(logits, "logits", dlogits, "dlogits");
  if (correct.defined())
    c.here(correct, "correct").that(correct.dtype() == DType::i32 && correct.numel() == 1, [&] {
      return "correct must be (1) I32, got " + describe(correct);
    });
}

void check_softmax(const Tensor& logits, const Tensor& probs, Device device) {
  OpCheck("softmax", device)
      .floating(logits, "logits")
      .here(probs, "probs")
      .that(logits.ndim() == 2 && probs.shape() == logits.shape() && probs.dtype() == DType::f32, [&] {
        return "expected logits (N, C) and probs (N, C) F32, got " + describe(logits) + ", " +
               describe(probs);
      });
}

void check_channel_softmax_forward(const Tensor& x, const Tensor& y, Device device) {
  OpCheck("channel_softmax_forward", device)
      .floating(x, "x")
      .here(y, "y")
      .like(x, "x", y, "y")
      .that(x.ndim() == 2 || x.ndim() == 4, [&] { return "expected (N, C) or (N, C, H, W), got " + describe(x); });
}

void check_channel_softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, Device device) {
  OpCheck("channel_softmax_backward", device)
      .floating(y, "y")
      .here(dy, "dy")
      .here(dx, "dx")
      .like(y, "y", dy, "dy")
      .like(y, "y", dx, "dx")
      .that(y.ndim() == 2 || y.ndim() == 4, [&] { return "expected (N, C) or (N, C, H, W), got " + describe(y); });
}

}  // namespace convoy
