// CudaOps linear layers: cuBLAS GEMMs, f32 accumulation; f32 inputs on TF32 tensor cores only
// where the backend allows it (its cuBLAS math mode).
#include "engine/backends/cuda/cuda_ops.h"

#include "engine/backends/cuda/cudnn_cublas_check.h"
#include "engine/backends/cuda/cuda_ops_internal.h"
#include "kernels/bias.cuh"
#include "kernels/elementwise.cuh"

namespace convoy::cuda {

// Row-major (N, K) x (M, K)^T is, seen column-major, y^T (M x N) = w^T-as-stored (K x M)^T . x^T (K x N).

void CudaOps::linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  check_linear_forward(x, w, b, y, device());
  require_supported(OpKind::linear_forward, x);
  const int n = to_int(x.dim(0), "N"), k = to_int(x.dim(1), "K"), m = to_int(w.dim(0), "M");
  const cudaDataType_t t = cublas_type(x.dtype());
  if (n > 0 && m > 0) {
    if (k == 0) {
      kernels::fill(dt_of(y.dtype()), y.raw(), 0.f, y.numel(), ctx_.stream);
    } else {
      CONVOY_CUBLAS_CHECK(cublasGemmEx(ctx_.cublas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &kOne, w.raw(), t, k,
                                       x.raw(), t, k, &kZero, y.raw(), t, m, CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT));
    }
  }
  if (b.defined())
    kernels::bias_add(dt_of(y.dtype()), y.raw(), dt_of(b.dtype()), b.raw(), n, m, 1, ctx_.stream);
}

void CudaOps::linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx,
                              Tensor& dw, Tensor& db) {
  check_linear_backward(x, w, dy, dx, dw, db, device());
  require_supported(OpKind::linear_backward, x);
  const int n = to_int(x.dim(0), "N"), k = to_int(x.dim(1), "K"), m = to_int(w.dim(0), "M");
  const cudaDataType_t t = cublas_type(x.dtype());
  if (dx.defined()) {
    // dx (N, K) = dy (N, M) w (M, K): column-major dx^T (K x N) = w^T (K x M) dy^T (M x N).
    if (m == 0) kernels::fill(dt_of(dx.dtype()), dx.raw(), 0.f, dx.numel(), ctx_.stream);
    else if (n > 0 && k > 0)
      CONVOY_CUBLAS_CHECK(cublasGemmEx(ctx_.cublas, CUBLAS_OP_N, CUBLAS_OP_N, k, n, m, &kOne, w.raw(), t, k,
                                       dy.raw(), t, m, &kZero, dx.raw(), t, k, CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT));
  }
  // dw (M, K) = dy^T (M, N) x (N, K): column-major dw^T (K x M) = x^T (K x N) dy (N x M).
  if (n == 0) kernels::fill(dt_of(dw.dtype()), dw.raw(), 0.f, dw.numel(), ctx_.stream);
  else if (m > 0 && k > 0)
    CONVOY_CUBLAS_CHECK(cublasGemmEx(ctx_.cublas, CUBLAS_OP_N, CUBLAS_OP_T, k, m, n, &kOne, x.raw(), t, k,
                                     dy.raw(), t, m, &kZero, dw.raw(), t, k, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT));
  if (db.defined()) {
    void* scratch = scratch_.get(kernels::bias_grad_scratch_bytes(n, m, 1));
    kernels::bias_grad(dt_of(dy.dtype()), dy.raw(), dt_of(db.dtype()), db.raw(), n, m, 1, scratch,
                       ctx_.stream);
  }
}

}  // namespace convoy::cuda
