// Golden test against PyTorch: one training step of tests/golden/golden_net.yaml on the CPU
// backend, checked by tests/golden/torch_golden.py, which rebuilds the net in torch.nn from the
// same YAML, loads Convoy's initial state, and recomputes logits, the label-smoothed loss, every
// parameter gradient and the batch-norm running statistics in float64. Agreement means
// max|convoy - torch| / max|torch| <= 1e-4 per tensor (Convoy computes in f32).
//
// The interpreter is $CONVOY_PYTHON, else /usr/bin/python3 (Debian's python3-torch) when it
// exists, else python3. Where it cannot import torch (the script exits 3) the tests skip,
// saying so.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/checkpoint/safetensors.h"
#include "engine/backends/backend.h"
#include "engine/graph/model.h"

namespace convoy {
namespace {

namespace fs = std::filesystem;

const std::string kGoldenDir = std::string(CONVOY_SOURCE_DIR) + "/tests/golden";
constexpr float kSmoothing = 0.1f;
constexpr int64_t kBatch = 4;

std::string python() {
  if (const char* p = std::getenv("CONVOY_PYTHON"); p && *p) return p;
  if (fs::exists("/usr/bin/python3")) return "/usr/bin/python3";
  return "python3";
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct CommandResult {
  int status = -1;  // exit status, or -1 when it did not exit normally
  std::string output;  // stdout and stderr
};

CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) {
    r.output = "popen failed for: " + command;
    return r;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Convoy's side of the step, as the script reads it.
struct GoldenStep {
  std::vector<NamedTensor> tensors;
  std::map<std::string, std::string> metadata;
  size_t compared = 0;  // rows the script must report: logits, loss, grads, running stats
};

GoldenStep run_convoy_step() {
  GoldenStep g;
  auto be = make_cpu_backend({});
  Model model = Model::from_file(kGoldenDir + "/golden_net.yaml", 2024);
  model.to(*be, DType::f32);

  std::set<std::string> param_names;
  for (auto& [name, p] : model.parameters()) param_names.insert(name);
  // state() shares storage with the layers, and the training forward updates the running
  // statistics in place: keep copies of the initial values.
  const std::vector<NamedTensor> initial = model.state();
  for (const NamedTensor& t : initial) g.tensors.push_back({t.name, t.tensor.clone()});

  const Shape& in = model.input_shape();
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> xv(static_cast<size_t>(kBatch * shape_numel(in)));
  for (float& v : xv) v = dist(rng);
  const Tensor x = Tensor::from_floats(xv, {kBatch, in[0], in[1], in[2]});  // (N, C, H, W)
  const Tensor labels = Tensor::from_ints({3, 0, 4, 1}, {kBatch});         // (N)

  const Tensor logits = model.forward(*be, x, StepInfo{true, 7});  // (N, classes)
  Tensor loss = be->empty({1}, DType::f32), correct = be->empty({1}, DType::i32);
  Tensor dlogits = be->empty(logits.shape(), DType::f32);
  be->ops().softmax_cross_entropy(logits, labels, kSmoothing, loss, dlogits, correct);
  model.backward(*be, dlogits);

  g.tensors.push_back({"input", x});
  g.tensors.push_back({"labels", labels});
  g.tensors.push_back({"logits", logits.clone()});
  g.tensors.push_back({"loss", loss.clone()});
  g.compared = 2;
  for (auto& [name, p] : model.parameters()) {
    g.tensors.push_back({"grad." + name, p->grad.clone()});
    ++g.compared;
  }
  for (const NamedTensor& t : model.state())
    if (!param_names.count(t.name)) {
      g.tensors.push_back({"after." + t.name, t.tensor.clone()});
      ++g.compared;
    }
  g.metadata["model_yaml"] = model.yaml();
  g.metadata["label_smoothing"] = "0.1";
  return g;
}

Tensor& tensor_named(GoldenStep& g, const std::string& name) {
  for (NamedTensor& t : g.tensors)
    if (t.name == name) return t.tensor;
  throw std::runtime_error("no tensor " + name);
}

// torch_golden.py's exit statuses.
constexpr int kAgree = 0, kMismatch = 1, kNoTorch = 3;

class GoldenTorch : public ::testing::Test {
 protected:
  void SetUp() override {
    python_ = python();
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("convoy_golden_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  void TearDown() override {
    if (HasFailure()) std::cout << "kept for inspection: " << dir_ << "\n";
    else fs::remove_all(dir_);
  }

  // Writes Convoy's results and runs the script on them (one torch import per call, which
  // takes seconds, so each test calls it once).
  CommandResult check(const GoldenStep& g, const std::string& file) {
    const fs::path path = dir_ / file;
    write_safetensors(path, g.tensors, g.metadata);
    return run_command(quote(python_) + " " + quote(kGoldenDir + "/torch_golden.py") + " " +
                       quote(path.string()));
  }

  std::string python_;
  fs::path dir_;
};

// The line of the script's table that starts with `name`, or "".
std::string table_line(const std::string& output, const std::string& name) {
  size_t pos = 0;
  while (pos < output.size()) {
    const size_t end = std::min(output.find('\n', pos), output.size());
    const std::string line = output.substr(pos, end - pos);
    if (line.rfind(name + " ", 0) == 0) return line;
    pos = end + 1;
  }
  return "";
}

TEST_F(GoldenTorch, GoldenNetStepMatchesPyTorchFloat64) {
  const GoldenStep g = run_convoy_step();
  const CommandResult r = check(g, "golden.safetensors");
  if (r.status == kNoTorch)
    GTEST_SKIP() << "PyTorch cannot be imported by " << python_
                 << " (set CONVOY_PYTHON to an interpreter with torch and numpy): " << r.output;
  std::cout << r.output;
  ASSERT_EQ(r.status, kAgree) << "torch_golden.py (" << python_
                              << ") reports a mismatch or could not run:\n" << r.output;
  // Every logit, loss, gradient and running statistic was compared, none silently skipped.
  const std::string n = std::to_string(g.compared);
  EXPECT_NE(r.output.find(n + " of " + n + " tensors agree"), std::string::npos) << r.output;
}

// The comparison is live: a 1% error in the largest element of one gradient and of one running
// statistic makes the script fail (exit status 1, not 2 "could not run") and flag exactly
// those two tensors.
TEST_F(GoldenTorch, CorruptedResultsAreDetected) {
  GoldenStep g = run_convoy_step();
  const std::vector<std::string> corrupted = {"grad.conv2.weight", "after.bn1.running_var"};
  for (const std::string& name : corrupted) {
    Tensor& t = tensor_named(g, name);
    float* v = t.data<float>();
    float* big = std::max_element(v, v + t.numel(), [](float a, float b) { return std::fabs(a) < std::fabs(b); });
    *big *= 1.01f;
  }
  const CommandResult r = check(g, "corrupted.safetensors");
  if (r.status == kNoTorch) GTEST_SKIP() << "PyTorch cannot be imported by " << python_ << ": " << r.output;
  EXPECT_EQ(r.status, kMismatch) << "the corruption was not detected:\n" << r.output;
  for (const std::string& name : corrupted)
    EXPECT_NE(table_line(r.output, name).find("MISMATCH"), std::string::npos)
        << name << " not flagged:\n" << r.output;
  const std::string ok = std::to_string(g.compared - 2) + " of " + std::to_string(g.compared) +
                         " tensors agree; 2 MISMATCH";
  EXPECT_NE(r.output.find(ok), std::string::npos) << r.output;
}

}  // namespace
}  // namespace convoy
