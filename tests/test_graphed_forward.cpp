// GraphedForward on a backend that records nothing (the CPU): the plain forward, no recording.
#include <gtest/gtest.h>

#include <string>

#include "engine/backends/backend.h"
#include "engine/graph/model.h"
#include "engine/inference/graphed_forward.h"

using namespace convoy;

TEST(GraphedForward, OnTheCpuItIsThePlainForward) {
  auto cpu = make_cpu_backend({});
  Model m = Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/lenet5.yaml", 3);
  m.to(*cpu, DType::f32);
  GraphedForward graphed(*cpu, m);
  std::vector<float> v(2 * 28 * 28);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 17) / 17.f;
  const Tensor x = Tensor::from_floats(v, {2, 1, 28, 28});
  EXPECT_EQ(graphed.run(x).to_floats(), m.forward(*cpu, x, StepInfo{}).to_floats());
  EXPECT_FALSE(graphed.last_run_replayed());
  EXPECT_EQ(graphed.recordings(), 0);
}
