// Which cuDNN convolution algorithm a plan takes from a heuristics or benchmark list.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <vector>

namespace convoy::cuda {

// FFT and non-fused Winograd compute in a transformed domain; in f32 their error grows with
// the filter (about 2e-3 of the largest output for a 5x5 data gradient on the H200, where
// the direct and GEMM algorithms stay near 1e-6). f32 is the exact mode (no TF32 either), so
// its plans avoid them; which algorithm a benchmark finds fastest depends on the moment's
// load, and an f32 result must not.
inline bool transform_based(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
inline bool transform_based(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
inline bool transform_based(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

// The first usable entry of a list (heuristics and benchmarks both come sorted, best first):
// it succeeded, fits in `limit` bytes of workspace, is deterministic where asked, and is not
// transform-based where `exact`. Null if none.
template <class Perf>
const Perf* pick_algo(const std::vector<Perf>& perf, int count, bool deterministic, size_t limit, bool exact) {
  for (int i = 0; i < count && i < static_cast<int>(perf.size()); ++i) {
    const Perf& p = perf[static_cast<size_t>(i)];
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    if (deterministic && p.determinism != CUDNN_DETERMINISTIC) continue;
    if (p.memory > limit) continue;
    if (exact && transform_based(p.algo)) continue;
    return &p;
  }
  return nullptr;
}

}  // namespace convoy::cuda
