#pragma once
// Host-side launchers of eight_bit.cu: the small steps of the GPU's 8-bit inference plan
// (issue 37) around cuDNN's 8-bit convolutions. 8-bit values are int8 or FP8 e4m3 bytes,
// channels-last, one scale per tensor: q = x * scale, saturated to the type's range. Each
// launcher queues its work on `stream`, checks the launch, and returns without synchronizing.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace convoy::kernels {

enum class Byte8 : int { int8 = 0, e4m3 = 1 };

// bf16 x (n elements) -> 8-bit y = saturate(round(x * scale)).
void quantize_bf16(const void* x, void* y, int64_t n, float scale, Byte8 type, cudaStream_t stream);
// The epilogue of a bf16 convolution whose output is stored in 8 bits (the stem, after its GEMM):
// bf16 x (n elements, channels-last with c channels) -> 8-bit y = saturate(round(relu?(x + bias[ch])
// * scale)), bias f32 (c); one pass instead of a bias pass, a ReLU pass and a quantization.
void bias_relu_quantize_bf16(const void* x, const float* bias, void* y, int64_t n, int64_t c, bool relu,
                             float scale, Byte8 type, cudaStream_t stream);
// 8-bit x -> bf16 y = x * inv_scale.
void dequantize_to_bf16(const void* x, void* y, int64_t n, float inv_scale, Byte8 type, cudaStream_t stream);
// Max pooling of 8-bit (n, h, w, c) -> (n, p, q, c), padding ignored (PyTorch's); the scale is
// unchanged (the maximum of quantized values is the quantized maximum).
void max_pool_8bit(const void* x, void* y, int64_t n, int64_t h, int64_t w, int64_t c, int64_t p, int64_t q,
                   int kernel_h, int kernel_w, int stride_h, int stride_w, int pad_h, int pad_w, Byte8 type,
                   cudaStream_t stream);
// The mean over each plane of 8-bit (n, h, w, c), dequantized: bf16 (n, c) = mean * inv_scale.
void global_avg_pool_8bit(const void* x, void* y, int64_t n, int64_t hw, int64_t c, float inv_scale, Byte8 type,
                          cudaStream_t stream);

}  // namespace convoy::kernels
