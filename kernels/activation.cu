// Elementwise activations, forward and backward: relu, leaky relu, the exact (erf) gelu,
// sigmoid, silu, hardsigmoid, hardswish and relu6 (PyTorch's definitions, activation.h).
// Layout-agnostic: they see flat arrays.
#include <cmath>

#include "kernels/activation.cuh"
#include "kernels/common.cuh"
#include "kernels/vec.cuh"

namespace convoy::kernels {

// ---- kernels ------------------------------------------------------------------------------

__host__ __device__ __forceinline__ float sigmoid(float v) { return 1.f / (1.f + expf(-v)); }
// PyTorch's Hardsigmoid: clamp(x / 6 + 1/2, 0, 1).
__host__ __device__ __forceinline__ float hardsigmoid(float v) { return fminf(fmaxf(v * (1.f / 6.f) + 0.5f, 0.f), 1.f); }

// __host__ too, so that the host compiler sees the switches and -Werror=switch turns a
// forgotten Activation into a build error (it never sees device-only code).
__host__ __device__ __forceinline__ float activation_value(Activation kind, float alpha, float v) {
  switch (kind) {
    case Activation::relu: return v > 0.f ? v : 0.f;
    case Activation::leaky_relu: return v > 0.f ? v : v * alpha;
    case Activation::gelu: return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
    case Activation::sigmoid: return sigmoid(v);
    case Activation::silu: return v * sigmoid(v);
    case Activation::hardsigmoid: return hardsigmoid(v);
    case Activation::hardswish: return v * hardsigmoid(v);
    case Activation::relu6: return fminf(fmaxf(v, 0.f), 6.f);
  }
  return NAN;  // not an Activation: the launchers refuse it before any launch
}

// dy * act'(v).
__host__ __device__ __forceinline__ float activation_grad(Activation kind, float alpha, float v, float g) {
  switch (kind) {
    case Activation::relu: return v > 0.f ? g : 0.f;
    case Activation::leaky_relu: return v > 0.f ? g : g * alpha;
    case Activation::gelu: {
      const float cdf = 0.5f * (1.f + erff(v * 0.70710678118654752f));
      const float pdf = expf(-0.5f * v * v) * 0.39894228040143268f;
      return g * (cdf + v * pdf);
    }
    case Activation::sigmoid: {
      const float s = sigmoid(v);
      return g * s * (1.f - s);
    }
    case Activation::silu: {  // s + x s (1 - s)
      const float s = sigmoid(v);
      return g * s * (1.f + v * (1.f - s));
    }
    // At a kink (x = -3, 3; 0, 6) the slope is the outer side's, as oneDNN's (the CPU's) is;
    // PyTorch's agrees but for hardswish at exactly -3 and 3 (its -0.5 and 1.5).
    case Activation::hardsigmoid: return v > -3.f && v < 3.f ? g * (1.f / 6.f) : 0.f;
    case Activation::hardswish: return v <= -3.f ? 0.f : v >= 3.f ? g : g * (v * (1.f / 3.f) + 0.5f);
    case Activation::relu6: return v > 0.f && v < 6.f ? g : 0.f;
  }
  return NAN;  // not an Activation: the launchers refuse it before any launch
}

template <class T>
__global__ void activation_forward_kernel(Activation kind, float alpha, const T* x,
                                          T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = from_f32<T>(activation_value(kind, alpha, to_f32(x[i])));
}

template <class T>
__global__ void activation_backward_kernel(Activation kind, float alpha, const T* x,
                                           const T* dy, T* dx, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dx[i] = from_f32<T>(activation_grad(kind, alpha, to_f32(x[i]), to_f32(dy[i])));
}

// The same over 16-byte vectors (n a multiple of the width, pointers aligned).
template <class T>
__global__ void activation_forward_vec_kernel(Activation kind, float alpha, const T* x, T* y, int64_t nvec) {
  constexpr int V = kVec<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < nvec;
       i += int64_t(gridDim.x) * blockDim.x) {
    float f[V];
    load_vec(x + i * V, f);
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = activation_value(kind, alpha, f[k]);
    store_vec(y + i * V, f);
  }
}

template <class T>
__global__ void activation_backward_vec_kernel(Activation kind, float alpha, const T* x, const T* dy, T* dx,
                                               int64_t nvec) {
  constexpr int V = kVec<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < nvec;
       i += int64_t(gridDim.x) * blockDim.x) {
    float fx[V], g[V];
    load_vec(x + i * V, fx);
    load_vec(dy + i * V, g);
#pragma unroll
    for (int k = 0; k < V; ++k) g[k] = activation_grad(kind, alpha, fx[k], g[k]);
    store_vec(dx + i * V, g);
  }
}

// ---- launchers ----------------------------------------------------------------------------

namespace {
void check_kind(Activation kind, const char* what) {
  switch (kind) {
    case Activation::relu:
    case Activation::leaky_relu:
    case Activation::gelu:
    case Activation::sigmoid:
    case Activation::silu:
    case Activation::hardsigmoid:
    case Activation::hardswish:
    case Activation::relu6: return;
  }
  throw InternalError(std::string(what) + ": unknown activation " + std::to_string(static_cast<int>(kind)));
}
}  // namespace

void activation_forward(Activation kind, float alpha, Dt dt, const void* x, void* y, int64_t n,
                        cudaStream_t stream) {
  if (n == 0) return;
  check_kind(kind, "activation_forward");
  dispatch_float(dt, "activation_forward", [&](auto t) {
    using T = decltype(t);
    if (vectorizable<T>(n, {x, y})) {
      const int64_t nvec = n / kVec<T>;
      activation_forward_vec_kernel<T><<<grid_for(nvec), kThreads, 0, stream>>>(
          kind, alpha, static_cast<const T*>(x), static_cast<T*>(y), nvec);
      CONVOY_LAUNCH_CHECK(activation_forward_vec_kernel);
      return;
    }
    activation_forward_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        kind, alpha, static_cast<const T*>(x), static_cast<T*>(y), n);
    CONVOY_LAUNCH_CHECK(activation_forward_kernel);
  });
}

void activation_backward(Activation kind, float alpha, Dt dt, const void* x, const void* dy, void* dx,
                         int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  check_kind(kind, "activation_backward");
  dispatch_float(dt, "activation_backward", [&](auto t) {
    using T = decltype(t);
    if (vectorizable<T>(n, {x, dy, dx})) {
      const int64_t nvec = n / kVec<T>;
      activation_backward_vec_kernel<T><<<grid_for(nvec), kThreads, 0, stream>>>(
          kind, alpha, static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), nvec);
      CONVOY_LAUNCH_CHECK(activation_backward_vec_kernel);
      return;
    }
    activation_backward_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        kind, alpha, static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), n);
    CONVOY_LAUNCH_CHECK(activation_backward_kernel);
  });
}

}  // namespace convoy::kernels
