#pragma once
// The fixture of the `convoy serve` tests: two LeNet-5 checkpoints trained once per test binary
// run by `convoy train` (Fashion-MNIST needed, else the tests skip), a repository folder per test.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/serve/serve_harness.h"
#include "tests/serve/serve_models.h"

namespace convoy::testing {

class ServeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(convoy::testing::kServeData + "/t10k-images-idx3-ubyte.gz")) return;
    runs_ = new convoy::testing::TempDir("convoy-serve-runs");
    checkpoint_a_ = convoy::testing::train_small_checkpoint(runs_->path(), 1);
    checkpoint_b_ = convoy::testing::train_small_checkpoint(runs_->path(), 2);
  }
  static void TearDownTestSuite() {
    delete runs_;
    runs_ = nullptr;
  }
  void SetUp() override {
    if (!std::filesystem::exists(convoy::testing::kServeData + "/t10k-images-idx3-ubyte.gz"))
      GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
    ASSERT_FALSE(checkpoint_a_.empty()) << "convoy train failed";
    ASSERT_FALSE(checkpoint_b_.empty()) << "convoy train failed";
  }
  // REPO/<model>/<version>/model.safetensors from `checkpoint`, and its config.yaml.
  void add_model(const std::string& model, int version, const std::string& checkpoint, const std::string& config) {
    const std::filesystem::path dir = repo() / model / std::to_string(version);
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(checkpoint, dir / "model.safetensors", std::filesystem::copy_options::overwrite_existing);
    convoy::testing::write_text_file(repo() / model / "config.yaml", config);
  }
  std::filesystem::path repo() const { return dir_.path() / "repo"; }
  std::string repo_arg() const { return "--model-repository " + repo().string(); }
  HttpResult post_json(const ServerProcess& s, const std::string& path, const nlohmann::json& body) {
    const std::filesystem::path file = dir_ / "request.json";
    convoy::testing::write_text_file(file, body.dump());
    return http("POST", s.url(path), "--data-binary @" + file.string(), dir_.path());
  }

  inline static convoy::testing::TempDir* runs_ = nullptr;
  inline static std::string checkpoint_a_, checkpoint_b_;
  convoy::testing::TempDir dir_{"convoy-serve"};
};

}  // namespace convoy::testing
