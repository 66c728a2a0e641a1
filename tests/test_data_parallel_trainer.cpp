// The training loop in a simulated world of two ranks (threads over shared memory, CPU
// backends): the same weights as one process at twice the batch, rank 0 alone writing, a stop
// signal on one rank stopping both at the same step, a resume on another number of ranks, and
// a batch with no readable image on one rank only (on_bad_image: skip).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "datasets/image_codec.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/config/run_config.h"
#include "engine/distributed/communicator.h"
#include "engine/train/trainer.h"
#include "tests/synthetic_run.h"
#include "tests/temp_dir.h"

using namespace convoy;

namespace {

class DataParallelTrainer : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_ / "net.yaml") << R"(name: tiny
input: [1, 8, 8]
classes: 4
layers:
  - {name: conv1, type: conv2d, out_channels: 4, kernel: 3}
  - {name: relu1, type: relu}
  - {name: flatten, type: flatten}
  - {name: fc1, type: linear, out_features: 4}
)";
  }

  RunConfig config(const std::string& name, int64_t batch) const {
    convoy::testing::SyntheticRun run;
    run.name = name;
    run.model = "net.yaml";
    run.shape = "[1, 8, 8]";
    run.size = 320;
    run.batch_size = batch;
    run.epochs = 2;
    run.optimizer = "{type: sgd, lr: 0.05, momentum: 0.9, weight_decay: 0.001}";
    run.seed = 9;
    run.output_dir = (dir_ / "runs").string();
    run.log_every = 3;
    return parse_run_config(convoy::testing::synthetic_run_yaml(run), "test.yaml", dir_.path().string(), {});
  }

  // Both ranks of a simulated world train `name`; rank r stops on its own flag.
  std::pair<TrainResult, TrainResult> two_ranks(const std::string& name, int64_t max_steps,
                                                std::atomic<bool>* stop1 = nullptr, bool resume = false) {
    auto world = make_thread_world(2);
    const RunConfig c = config(name, 16);
    TrainResult results[2];
    std::ostringstream logs[2];
    auto run = [&](int r) {
      TrainOptions o;
      o.communicator = world[r].get();
      o.max_steps = max_steps;
      o.resume = resume;
      if (r == 1) o.stop_requested = stop1;
      results[r] = train(c, o, logs[r]);
    };
    std::thread t1(run, 1);
    run(0);
    t1.join();
    log0_ = logs[0].str();
    EXPECT_EQ(logs[1].str(), "") << "rank 1 logs nothing";
    return {results[0], results[1]};
  }

  std::map<std::string, std::vector<float>> model_tensors(const std::string& name) const {
    std::map<std::string, std::vector<float>> out;
    for (const auto& t : read_safetensors(dir_ / "runs" / name / "last.safetensors").tensors)
      if (!t.name.starts_with("optim.")) out[t.name] = t.tensor.to_floats();
    return out;
  }

  convoy::testing::TempDir dir_{"convoy-ddp-trainer"};
  std::string log0_;
};

double max_rel_diff(const std::map<std::string, std::vector<float>>& a,
                    const std::map<std::string, std::vector<float>>& b) {
  double worst = 0;
  for (const auto& [name, values] : b)
    for (size_t i = 0; i < values.size(); ++i)
      worst = std::max(worst, std::abs(static_cast<double>(a.at(name)[i]) - values[i]) / (1e-3 + std::abs(values[i])));
  return worst;
}

}  // namespace

TEST_F(DataParallelTrainer, TwoRanksTrainLikeOneProcessAtTwiceTheBatch) {
  const auto [r0, r1] = two_ranks("two", 0);
  EXPECT_EQ(r0.epochs_done, 2);
  EXPECT_EQ(r0.steps, 20);  // 320 samples / (16 x 2) per step, 2 epochs
  EXPECT_EQ(r1.steps, 20);
  EXPECT_NE(log0_.find("data parallel: 2 threads (simulated); batch 16 per rank, effective batch 32"),
            std::string::npos)
      << log0_;
  std::ostringstream log;
  const TrainResult one = train(config("one", 32), TrainOptions{}, log);
  EXPECT_EQ(one.steps, 20);
  EXPECT_LT(max_rel_diff(model_tensors("two"), model_tensors("one")), 1e-4);
  EXPECT_NEAR(r0.test_accuracy, one.test_accuracy, 1e-9);  // rank 0 evaluated the same weights
  // One process at the per-rank batch trains other weights: the comparison can tell.
  train(config("half", 16), TrainOptions{}, log);
  EXPECT_GT(max_rel_diff(model_tensors("half"), model_tensors("one")), 1e-3);
  // metrics.csv: rank 0's, one row per epoch.
  std::ifstream metrics(dir_ / "runs/two/metrics.csv");
  int rows = 0;
  for (std::string line; std::getline(metrics, line);) ++rows;
  EXPECT_EQ(rows, 3);
}

TEST_F(DataParallelTrainer, AStopOnOneRankStopsBothAtTheSameStepAndResumesOnOneRank) {
  std::atomic<bool> stop{true};  // rank 1's signal only, there from the start
  const auto [r0, r1] = two_ranks("stop", 0, &stop);
  EXPECT_TRUE(r0.interrupted);
  EXPECT_TRUE(r1.interrupted);
  EXPECT_EQ(r0.steps, 3);  // the first reading point (log_every 3), on both ranks
  EXPECT_EQ(r1.steps, 3);
  const SafetensorsFile ckpt = read_safetensors(dir_ / "runs/stop/last.safetensors");
  EXPECT_EQ(ckpt.metadata.at("step"), "3");
  EXPECT_EQ(ckpt.metadata.at("global_batch"), "32");
  // One process at batch 16 continues: 3 batches of 32 are 6 of 16.
  std::ostringstream log;
  TrainOptions o;
  o.resume = true;
  o.max_steps = 8;
  const TrainResult again = train(config("stop", 16), o, log);
  EXPECT_NE(log.str().find("the checkpoint was written at a global batch of 32, this run's is 16: continuing at "
                           "batch 6 of epoch 1 (step 6)"),
            std::string::npos)
      << log.str();
  EXPECT_EQ(again.steps, 8);
}

// A rank whose batch has no readable image must not skip a step the other rank takes (it would
// wait for it in the gradient all-reduce until the job's timeout): every rank leaves that batch
// out. Half the training files are not images; one image per rank per step.
TEST_F(DataParallelTrainer, ABatchUnreadableOnOneRankIsLeftOutOnEveryRank) {
  namespace fs = std::filesystem;
  const fs::path root = dir_ / "images";
  const char* classes[] = {"a", "b", "c", "d"};
  for (int c = 0; c < 4; ++c)
    for (const char* split : {"train", "val"}) {
      fs::create_directories(root / split / classes[c]);
      for (int i = 0; i < 3; ++i) {
        std::vector<uint8_t> px(64, static_cast<uint8_t>(40 + 60 * c + 5 * i));
        convoy::testing::write_file(root / split / classes[c] / (std::to_string(i) + ".png"),
                                    encode_png(px.data(), 8, 8, 1));
        if (std::string(split) == "train")
          std::ofstream(root / split / classes[c] / ("bad" + std::to_string(i) + ".png")) << "not a PNG\n";
      }
    }
  std::ofstream(dir_ / "bad.yaml") << "name: bad\nmodel: net.yaml\ndataset:\n  kind: image-folder\n  path: "
                                   << root.string()
                                   << "\n  test_split: val\n  resize: 8\n  on_bad_image: skip\n"
                                      "  normalize: {mean: [0.5], std: [0.25]}\n"
                                      "batch_size: 1\nepochs: 2\noptimizer: {type: sgd, lr: 0.05}\nseed: 5\n"
                                      "device: cpu\nthreads: 1\noutput: {dir: "
                                   << (dir_ / "runs").string() << "}\n";
  std::ifstream in(dir_ / "bad.yaml");
  const std::string yaml{std::istreambuf_iterator<char>(in), {}};
  const RunConfig c = parse_run_config(yaml, (dir_ / "bad.yaml").string(), dir_.path().string(), {});
  auto world = make_thread_world(2);
  TrainResult results[2];
  std::ostringstream logs[2];
  auto run = [&](int r) {
    TrainOptions o;
    o.communicator = world[r].get();
    results[r] = train(c, o, logs[r]);
  };
  std::thread t1(run, 1);
  run(0);
  t1.join();
  const std::string log = logs[0].str();
  EXPECT_EQ(results[0].epochs_done, 2) << log;
  EXPECT_EQ(results[0].steps, results[1].steps) << log;
  // 24 files, 12 per rank, each rank's step one of its files: the steps are the pairs in which
  // both files are images, the rest are left out.
  const std::regex left_out("skipped unreadable images \\(on_bad_image: skip\\): 12 in training, 0 in evaluation; "
                            "([0-9]+) training batch(es)? left out on every rank \\(a rank had no readable image in it\\)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, left_out)) << log;
  const int64_t per_epoch = std::stoll(m[1]);
  EXPECT_GT(per_epoch, 0) << log;
  EXPECT_LT(per_epoch, 12) << log;
  EXPECT_LE(results[0].steps, 2 * (12 - 6)) << log;  // at most 6 of a rank's 12 files are images
}

