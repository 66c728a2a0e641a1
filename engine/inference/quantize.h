#pragma once
// Post-training int8 quantization for the CPU inference plan: calibration of every tensor's
// range on sample inputs, and those ranges as a checkpoint stores them (by layer name).
// Weights need no calibration: the plan gives each output channel its own symmetric s8 scale.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/graph/model.h"

namespace convoy {

// The name under which the model input's range is stored (layer names are the others).
inline constexpr const char* kQuantInputName = "input";

// The bounds of a calibrated range (largest |value| of a tensor). Below the lower one the
// tensor's int8 scale makes every value but zero saturate: a zeroed or corrupt file (all ranges
// 0 or 1e-45 gave 10% accuracy without a word), or a layer whose output calibration found zero.
// 0 is also "no range": a node fused into the next has no output of its own.
inline constexpr double kMinActivationRange = 1e-6;
inline constexpr double kMaxActivationRange = 1e30;

// Throws InputError "<source>: int8 activation range of layer '<name>' is <range>; ..." (of
// "the input" for kQuantInputName) unless the range is within the bounds above, or 0 where
// `quantized` is false (InferencePlan::quantized_outputs; the input is always quantized).
void check_activation_range(const std::string& name, double range, bool quantized, const std::string& source);

// The |values| one tensor held over the calibration images: their largest, and (where kept) a
// histogram to take a percentile from. The bins are |x|'s f32 bit patterns without the low 16
// bits (8 exponent and 7 mantissa bits): values 0.8% apart or closer share a bin, over the whole
// f32 range, so no first pass is needed to find the range.
class ActivationHistogram {
 public:
  static constexpr size_t kBins = size_t{1} << 15;
  explicit ActivationHistogram(bool bins = true) : keep_bins_(bins) {}
  void add(const float* values, size_t n);
  void merge(const ActivationHistogram& other);
  void clear();  // empty again, its bins kept allocated
  float max() const { return max_; }
  uint64_t count() const { return count_; }
  uint64_t non_finite() const { return non_finite_; }
  bool keeps_bins() const { return keep_bins_; }
  // The upper edge of the bin where `percent` of the values (zeros included) lie at or below,
  // never above max(); max() where no bins are kept.
  float percentile(double percent) const;

 private:
  bool keep_bins_;
  std::vector<uint64_t> bins_;  // kBins once a value came
  uint64_t count_ = 0, non_finite_ = 0;
  float max_ = 0;
};

// How a tensor's range comes from its calibration values.
//   max: the largest |value| (what the CPU's int8 plan has always used; FP8's e4m3 reaches 448
//     with 3 mantissa bits, so the rare large value costs it little precision elsewhere).
//   percentile: the |value| under which `percentile`% of the values lie. For int8's 255 even
//     steps, one outlier of a tensor (ReLU outputs have long tails) would otherwise set a step
//     so coarse that the bulk of the values fall into a few of them; clipping the rarest 0.01%
//     keeps the steps fine (TensorRT's and pytorch-quantization's percentile calibrators; entropy
//     calibration chooses a clip by KL divergence instead, for about the same ranges on CNNs).
enum class CalibrationMethod { max, percentile };
struct Calibration {
  CalibrationMethod method = CalibrationMethod::max;
  double percentile = 99.99;  // percentile only, in (0, 100]
  int threads = 0;            // the fp32 plan's team (0 = all cores)
};
const char* calibration_method_name(CalibrationMethod method);

// Runs the fp32 plan over `batches` (each (N, C, H, W) f32 nchw, normalized as the model
// expects) and returns the range of the input ([0]) and of each graph node's output ([i + 1])
// by `calibration`'s method: symmetric 8-bit quantization, one range per tensor; 0 for a node
// fused into the next. The same batches give the same ranges, whatever the team. A quantized
// output below kMinActivationRange (0 on every image) is an InputError naming the layer.
std::vector<float> calibrate_activation_ranges(Model& model, const std::vector<Tensor>& batches,
                                               const Calibration& calibration);
// The max method.
inline std::vector<float> calibrate_activation_max(Model& model, const std::vector<Tensor>& batches, int threads = 0) {
  return calibrate_activation_ranges(model, batches, Calibration{CalibrationMethod::max, 100, threads});
}

// node_max by name: {"input": max, "<layer>": max, ...}.
std::map<std::string, double> activation_max_by_name(Model& model, const std::vector<float>& node_max);
// Back to the plan's order; a layer missing from `named`, a name not in the model, or a range
// check_activation_range refuses is an InputError naming `source`.
std::vector<float> activation_max_by_node(Model& model, const std::map<std::string, double>& named,
                                          const std::string& source);

}  // namespace convoy
