// Softmax and softmax cross-entropy with label smoothing, one warp per row, f32 math.
// The loss mean and the correct count are reduced by one block in a fixed order, so
// both are deterministic. The softmax layer's softmax over channels: one thread per position
// of the (outer, C, inner) view, its channels in a loop (either layout, any C).
#include <cmath>

#include "kernels/common.cuh"
#include "kernels/softmax.cuh"

namespace convoy::kernels {

namespace {
constexpr int kRowsPerBlock = 8;  // warps per block
}

// ---- kernels ------------------------------------------------------------------------------

// Row max and the first index holding it, over the warp.
template <class T>
__device__ __forceinline__ void row_max_argmax(const T* z, int64_t classes, float& m, int64_t& arg) {
  m = -INFINITY;
  arg = -1;
  for (int64_t c = threadIdx.x & 31; c < classes; c += 32) {
    const float v = to_f32(z[c]);
    if (arg < 0 || v > m) {
      m = v;
      arg = c;
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float om = __shfl_xor_sync(0xffffffffu, m, o);
    const int64_t oa = __shfl_xor_sync(0xffffffffu, arg, o);
    if (oa >= 0 && (arg < 0 || om > m || (om == m && oa < arg))) {
      m = om;
      arg = oa;
    }
  }
}

template <class T>
__global__ void softmax_xent_rows(const T* __restrict__ logits, const int32_t* __restrict__ labels,
                                  float smoothing, T* __restrict__ dlogits,
                                  float* __restrict__ row_loss, int32_t* __restrict__ row_correct,
                                  int64_t rows, int64_t classes) {
  const int64_t r = blockIdx.x * int64_t(kRowsPerBlock) + (threadIdx.x >> 5);
  if (r >= rows) return;
  const int lane = threadIdx.x & 31;
  const T* z = logits + r * classes;
  float m;
  int64_t arg;
  row_max_argmax(z, classes, m, arg);
  float se = 0.f, sz = 0.f;
  for (int64_t c = lane; c < classes; c += 32) {
    const float v = to_f32(z[c]);
    se += expf(v - m);
    sz += v;
  }
  se = warp_sum(se);
  sz = warp_sum(sz);
  const float lse = m + logf(se);
  const int32_t label = labels[r];
  const bool valid = label >= 0 && label < classes;
  const float off = smoothing / static_cast<float>(classes);
  if (lane == 0) {
    row_loss[r] = valid ? lse - (1.f - smoothing) * to_f32(z[label]) - off * sz : NAN;
    row_correct[r] = valid && arg == label ? 1 : 0;
  }
  if (dlogits) {
    const float inv_rows = 1.f / static_cast<float>(rows);
    T* d = dlogits + r * classes;
    for (int64_t c = lane; c < classes; c += 32) {
      const float p = expf(to_f32(z[c]) - m) / se;
      const float target = (c == label ? 1.f - smoothing : 0.f) + off;
      d[c] = from_f32<T>(valid ? (p - target) * inv_rows : NAN);
    }
  }
}

__global__ void softmax_xent_total(const float* __restrict__ row_loss,
                                   const int32_t* __restrict__ row_correct, int64_t rows,
                                   float* __restrict__ loss, int32_t* __restrict__ correct) {
  double sum = 0;
  long long hits = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    sum += row_loss[r];
    hits += row_correct[r];
  }
  sum = block_sum(sum);
  hits = block_sum(hits);
  if (threadIdx.x == 0) {
    *loss = static_cast<float>(sum / static_cast<double>(rows));
    if (correct) *correct = static_cast<int32_t>(hits);
  }
}

template <class T>
__global__ void softmax_rows(const T* __restrict__ logits, float* __restrict__ probs, int64_t rows,
                             int64_t classes) {
  const int64_t r = blockIdx.x * int64_t(kRowsPerBlock) + (threadIdx.x >> 5);
  if (r >= rows) return;
  const int lane = threadIdx.x & 31;
  const T* z = logits + r * classes;
  float m;
  int64_t arg;
  row_max_argmax(z, classes, m, arg);
  float se = 0.f;
  for (int64_t c = lane; c < classes; c += 32) se += expf(to_f32(z[c]) - m);
  se = warp_sum(se);
  float* out = probs + r * classes;
  for (int64_t c = lane; c < classes; c += 32) out[c] = expf(to_f32(z[c]) - m) / se;
}

// y = softmax over c of x viewed as (outer, channels, inner), the maximum subtracted first.
template <class T>
__global__ void channel_softmax_forward_kernel(const T* x, T* y, int64_t outer, int64_t channels, int64_t inner) {
  const int64_t positions = outer * inner;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < positions;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = (i / inner) * channels * inner + i % inner;
    float m = -INFINITY;
    for (int64_t c = 0; c < channels; ++c) m = fmaxf(m, to_f32(x[base + c * inner]));
    float sum = 0.f;
    for (int64_t c = 0; c < channels; ++c) sum += expf(to_f32(x[base + c * inner]) - m);
    const float inv = 1.f / sum;
    for (int64_t c = 0; c < channels; ++c)
      y[base + c * inner] = from_f32<T>(expf(to_f32(x[base + c * inner]) - m) * inv);
  }
}

// dx = y * (dy - sum_c y dy), the same view.
template <class T>
__global__ void channel_softmax_backward_kernel(const T* y, const T* dy, T* dx, int64_t outer, int64_t channels,
                                                int64_t inner) {
  const int64_t positions = outer * inner;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < positions;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = (i / inner) * channels * inner + i % inner;
    float dot = 0.f;
    for (int64_t c = 0; c < channels; ++c) dot += to_f32(y[base + c * inner]) * to_f32(dy[base + c * inner]);
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t k = base + c * inner;
      dx[k] = from_f32<T>(to_f32(y[k]) * (to_f32(dy[k]) - dot));
    }
  }
}

// ---- launchers ----------------------------------------------------------------------------

size_t softmax_cross_entropy_scratch_bytes(int64_t rows) {
  return static_cast<size_t>(rows) * (sizeof(float) + sizeof(int32_t)) + 256;
}

void softmax_cross_entropy(Dt dt, const void* logits, const int32_t* labels, float smoothing,
                           float* loss, void* dlogits, int32_t* correct, int64_t rows,
                           int64_t classes, void* scratch, cudaStream_t stream) {
  if (rows == 0 || classes == 0) throw InternalError("softmax_cross_entropy: empty logits");
  auto* row_loss = static_cast<float*>(scratch);
  auto* row_correct = reinterpret_cast<int32_t*>(static_cast<char*>(scratch) +
                                                 (rows * sizeof(float) + 15) / 16 * 16);
  const unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  dispatch_float(dt, "softmax_cross_entropy", [&](auto t) {
    using T = decltype(t);
    softmax_xent_rows<T><<<blocks, kRowsPerBlock * 32, 0, stream>>>(
        static_cast<const T*>(logits), labels, smoothing, static_cast<T*>(dlogits), row_loss,
        row_correct, rows, classes);
    CONVOY_LAUNCH_CHECK(softmax_xent_rows);
  });
  softmax_xent_total<<<1, 1024, 0, stream>>>(row_loss, row_correct, rows, loss, correct);
  CONVOY_LAUNCH_CHECK(softmax_xent_total);
}

void softmax(Dt dt, const void* logits, float* probs, int64_t rows, int64_t classes,
             cudaStream_t stream) {
  if (rows == 0 || classes == 0) return;
  const unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  dispatch_float(dt, "softmax", [&](auto t) {
    using T = decltype(t);
    softmax_rows<T><<<blocks, kRowsPerBlock * 32, 0, stream>>>(static_cast<const T*>(logits), probs,
                                                                rows, classes);
    CONVOY_LAUNCH_CHECK(softmax_rows);
  });
}

void channel_softmax_forward(Dt dt, const void* x, void* y, int64_t outer, int64_t channels, int64_t inner,
                             cudaStream_t stream) {
  const int64_t positions = outer * inner;
  if (positions == 0 || channels == 0) return;
  dispatch_float(dt, "channel_softmax_forward", [&](auto t) {
    using T = decltype(t);
    channel_softmax_forward_kernel<T><<<grid_for(positions), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), outer, channels, inner);
    CONVOY_LAUNCH_CHECK(channel_softmax_forward_kernel);
  });
}

void channel_softmax_backward(Dt dt, const void* y, const void* dy, void* dx, int64_t outer, int64_t channels,
                              int64_t inner, cudaStream_t stream) {
  const int64_t positions = outer * inner;
  if (positions == 0 || channels == 0) return;
  dispatch_float(dt, "channel_softmax_backward", [&](auto t) {
    using T = decltype(t);
    channel_softmax_backward_kernel<T><<<grid_for(positions), kThreads, 0, stream>>>(
        static_cast<const T*>(y), static_cast<const T*>(dy), static_cast<T*>(dx), outer, channels, inner);
    CONVOY_LAUNCH_CHECK(channel_softmax_backward_kernel);
  });
}

}  // namespace convoy::kernels
