#pragma once
// 8-bit GPU inference (issue 37): a model, batch norms folded and calibrated, as the steps a
// backend compiles into one forward pass at a batch size (Backend::compile_8bit).
// engine/inference builds the steps from the model's graph and a checkpoint's ranges
// (eight_bit_graph.h); the backend decides which of them run in 8 bits and owns the buffers.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/ops/conv2d.h"
#include "engine/ops/pool2d.h"

namespace convoy {

// The two 8-bit types: int8 (symmetric, [-127, 127]) and FP8 e4m3 (to +-448, 3 mantissa bits).
enum class EightBitType : uint8_t { int8, fp8 };
const char* eight_bit_name(EightBitType type);  // "int8", "fp8"
// The type's largest magnitude: a tensor of range R is stored as x * (eight_bit_max / R).
float eight_bit_max(EightBitType type);

struct EightBitStep {
  enum class Kind : uint8_t { conv, linear, max_pool, avg_pool, flatten };
  Kind kind = Kind::conv;
  std::string name;   // the layer whose output this step writes (messages, describe())
  int input = 0;      // the value it reads: 0 the model input, i + 1 step i's output
  int residual = -1;  // conv: the value added before the ReLU, or -1
  bool relu = false;  // conv and linear
  // The calibrated largest |value| of the output, where the output may be stored in 8 bits;
  // 0 where it never is (the logits) or it keeps its input's scale (max pooling).
  float range = 0;
  Conv2dParams conv{};  // conv
  Pool2dParams pool{};  // pools (a global one: the window over the whole plane)
  Tensor weight;        // conv (K, C, R, S), linear (out, in): f32 on the host, batch norm folded in
  Tensor bias;          // (K) or (out) f32 on the host
  Shape shape;          // per-sample output shape
};

struct EightBitGraph {
  EightBitType type = EightBitType::int8;
  Shape input;             // (C, H, W)
  float input_range = 0;   // the model input's calibrated range
  std::vector<EightBitStep> steps;  // in order; the last one writes the logits
};

// One compiled forward at one batch size: its own input and output buffers (a recording of
// run() replays with them), everything planned and timed when it is made.
class CompiledForward {
 public:
  virtual ~CompiledForward() = default;
  // (batch, C, H, W) bf16 channels-last on the device: where the caller writes the images.
  virtual Tensor& input() = 0;
  // Queues the forward of input() and returns the logits (batch, classes) bf16, a buffer of the
  // plan's that the next run() overwrites. Never waits for the device (it can be recorded).
  virtual const Tensor& run() = 0;
  // The buffer run() writes the logits into (what a replayed recording of run() writes).
  virtual const Tensor& output() const = 0;
  // One line per step: the layer, how it runs (8-bit, or bf16 and why).
  virtual std::string describe() const = 0;
  // How many convolutions run in 8 bits (the others in bf16).
  virtual int eight_bit_convolutions() const = 0;
};

}  // namespace convoy
