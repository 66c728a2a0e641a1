#include "datasets/nvjpeg/crop_resize.cuh"

namespace convoy::nvjpeg {
namespace {

constexpr int kPrecisionBits = 22;  // PIL's for 8-bit images (datasets/resample.cpp)

// One output position's window along an axis: first source index, taps, and what turns a
// triangle value into a fixed-point weight (the sum of the window's triangle values).
struct Window {
  int start = 0, count = 0;
  double center = 0, inv_scale = 1, sum = 1;
  bool nearest = false;
};

__device__ double triangle(double x) {
  x = fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// PIL's precompute_coeffs for output index `i`, as axis_weights in resample.cpp.
__device__ Window window_of(int in_size, double in0, double in_len, int out_size, int i) {
  const double scale = in_len / out_size;
  const double filter_scale = fmax(scale, 1.0);
  const double support = filter_scale;
  const int taps = static_cast<int>(ceil(support)) * 2 + 1;
  Window w;
  // __dmul_rn/__dadd_rn: no fused multiply-add, so the doubles round as the CPU's do.
  w.center = __dadd_rn(in0, __dmul_rn(i + 0.5, scale));
  w.inv_scale = 1.0 / filter_scale;
  long long lo = static_cast<long long>(w.center - support + 0.5);  // C truncation, as PIL
  lo = lo < 0 ? 0 : lo;
  long long hi = static_cast<long long>(w.center + support + 0.5);
  hi = hi < in_size ? hi : in_size;
  long long n = hi - lo;
  n = n < taps ? n : taps;
  double sum = 0;
  for (long long x = 0; x < n; ++x) sum += triangle((static_cast<double>(x + lo) - w.center + 0.5) * w.inv_scale);
  if (n <= 0 || sum == 0.0) {  // wholly outside the image: the nearest edge pixel
    const double f = floor(w.center);
    w.start = static_cast<int>(f < 0 ? 0 : f > in_size - 1 ? in_size - 1 : f);
    w.count = 1;
    w.nearest = true;
    return w;
  }
  w.start = static_cast<int>(lo);
  w.count = static_cast<int>(n);
  w.sum = sum;
  return w;
}

__device__ int weight_of(const Window& w, int k) {
  if (w.nearest) return 1 << kPrecisionBits;
  const double t = triangle((static_cast<double>(w.start + k) - w.center + 0.5) * w.inv_scale);
  // Divided, as resample.cpp does: t * (1 / sum) can differ from t / sum in the last bit.
  return static_cast<int>(__dadd_rn(0.5, __dmul_rn(t / w.sum, static_cast<double>(1 << kPrecisionBits))));
}

__device__ int clip8(int acc) {
  const int v = acc >> kPrecisionBits;
  return v < 0 ? 0 : v > 255 ? 255 : v;
}

__device__ int gray_of(const uint8_t* px) { return (px[0] * 4899 + px[1] * 9617 + px[2] * 1868 + 8192) >> 14; }

// One thread per output pixel, blockIdx.y the image.
__global__ void crop_resize_kernel(const CropResizeJob* jobs, int out_width, int out_height, int out_channels) {
  const CropResizeJob job = jobs[blockIdx.y];
  const int pixel = blockIdx.x * blockDim.x + threadIdx.x;
  if (pixel >= out_width * out_height) return;
  const int ox = pixel % out_width, oy = pixel / out_width;
  const Window wx = window_of(job.width, job.box_x, job.box_width, out_width, ox);
  const Window wy = window_of(job.height, job.box_y, job.box_height, out_height, oy);
  const int half = 1 << (kPrecisionBits - 1);
  int acc[3] = {half, half, half};
  if (job.vertical_first) {  // each contributing column down, rounded, then across
    for (int kx = 0; kx < wx.count; ++kx) {
      const uint8_t* col = job.src + static_cast<int64_t>(wx.start + kx) * 3;
      int v[3] = {half, half, half};
      for (int ky = 0; ky < wy.count; ++ky) {
        const int k = weight_of(wy, ky);
        const uint8_t* px = col + static_cast<int64_t>(wy.start + ky) * job.pitch;
        if (out_channels == 1) {
          v[0] += gray_of(px) * k;
        } else {
          v[0] += px[0] * k;
          v[1] += px[1] * k;
          v[2] += px[2] * k;
        }
      }
      const int k = weight_of(wx, kx);
      for (int c = 0; c < out_channels; ++c) acc[c] += clip8(v[c]) * k;
    }
    const int plane = out_width * out_height;
    for (int c = 0; c < out_channels; ++c) job.dst[c * plane + pixel] = static_cast<uint8_t>(clip8(acc[c]));
    return;
  }
  for (int ky = 0; ky < wy.count; ++ky) {
    const uint8_t* row = job.src + static_cast<int64_t>(wy.start + ky) * job.pitch;
    int h[3] = {half, half, half};
    for (int kx = 0; kx < wx.count; ++kx) {
      const int k = weight_of(wx, kx);
      const uint8_t* px = row + static_cast<int64_t>(wx.start + kx) * 3;
      if (out_channels == 1) {
        h[0] += gray_of(px) * k;
      } else {
        h[0] += px[0] * k;
        h[1] += px[1] * k;
        h[2] += px[2] * k;
      }
    }
    const int k = weight_of(wy, ky);
    for (int c = 0; c < out_channels; ++c) acc[c] += clip8(h[c]) * k;
  }
  const int plane = out_width * out_height;
  for (int c = 0; c < out_channels; ++c) job.dst[c * plane + pixel] = static_cast<uint8_t>(clip8(acc[c]));
}

}  // namespace

void launch_crop_resize(const CropResizeJob* jobs, int count, int out_width, int out_height, int out_channels,
                        cudaStream_t stream) {
  if (count == 0) return;
  constexpr int kThreads = 128;
  const dim3 grid((out_width * out_height + kThreads - 1) / kThreads, count);
  crop_resize_kernel<<<grid, kThreads, 0, stream>>>(jobs, out_width, out_height, out_channels);
}

}  // namespace convoy::nvjpeg
