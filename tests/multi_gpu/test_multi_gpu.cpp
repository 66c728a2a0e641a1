// Data-parallel training on two GPUs of one host (labelled `cuda`; skipped, with the reason,
// where fewer than two GPUs are usable): a two-rank run equals one GPU on the combined batch,
// a killed or hung rank stops the other within the timeout naming the rank, and SIGTERM to the
// job checkpoints once and resumes on another number of GPUs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

#include "engine/backends/backend.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/distributed/communicator.h"
#include "engine/distributed/launcher.h"
#include "tests/run_command.h"
#include "tests/synthetic_run.h"

namespace {

namespace fs = std::filesystem;
using convoy::testing::CommandResult;

// GPUs that `convoy doctor` lists as usable.
int usable_gpus() {
  if (!convoy::cuda_unavailable_reason().empty()) return 0;
  const CommandResult r = convoy::testing::run_command(std::string(CONVOY_BINARY) + " doctor 2>&1");
  int n = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string tag = "cuda:" + std::to_string(i) + ": ";
    const size_t at = r.output.find(tag);
    if (at == std::string::npos) break;
    const size_t end = r.output.find('\n', at);
    if (r.output.substr(at, end - at).find("unusable") == std::string::npos) ++n;
  }
  return n;
}

#define REQUIRE_TWO_GPUS()                                                                    \
  do {                                                                                        \
    const int gpus_ = usable_gpus();                                                          \
    if (gpus_ < 2)                                                                            \
      GTEST_SKIP() << "needs two usable GPUs, this machine has " << gpus_                     \
                   << (gpus_ == 0 ? " (" + convoy::cuda_unavailable_reason() + ")" : "");    \
  } while (0)

// A run directory with a net without batch norm or dropout (so a step's gradient is the mean
// of per-sample gradients and two ranks can equal one GPU exactly) and a synthetic data set.
class MultiGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("convoy_multi_gpu_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "net.yaml") << R"(name: plain
input: [1, 28, 28]
classes: 10
layers:
  - {name: conv1, type: conv2d, out_channels: 16, kernel: 3, padding: 1}
  - {name: relu1, type: relu}
  - {name: pool1, type: maxpool2d, kernel: 2}
  - {name: conv2, type: conv2d, out_channels: 32, kernel: 3, padding: 1}
  - {name: relu2, type: relu}
  - {name: pool2, type: maxpool2d, kernel: 2}
  - {name: flatten, type: flatten}
  - {name: fc1, type: linear, out_features: 10}
)";
    std::ofstream(dir_ / "net_bn.yaml") << R"(name: plain_bn
input: [1, 28, 28]
classes: 10
layers:
  - {name: conv1, type: conv2d, out_channels: 16, kernel: 3, padding: 1, bias: false}
  - {name: bn1, type: batchnorm2d}
  - {name: relu1, type: relu}
  - {name: pool1, type: maxpool2d, kernel: 2}
  - {name: conv2, type: conv2d, out_channels: 32, kernel: 3, padding: 1, bias: false}
  - {name: bn2, type: batchnorm2d}
  - {name: relu2, type: relu}
  - {name: pool2, type: maxpool2d, kernel: 2}
  - {name: flatten, type: flatten}
  - {name: fc1, type: linear, out_features: 10}
)";
    convoy::testing::SyntheticRun run;
    run.name = "ddp";
    run.model = (dir_ / "net.yaml").string();
    run.shape = "[1, 28, 28]";
    run.classes = 10;
    run.size = 8192;
    run.test_limit = 0;
    run.batch_size = 64;
    run.epochs = 20;
    run.optimizer = "{type: sgd, lr: 0.05, momentum: 0.9, weight_decay: 0.0005}";
    run.seed = 7;
    run.device = "cuda";
    run.threads = 0;
    run.output_dir = (dir_ / "runs").string();
    run.log_every = 1;
    run.extra = "precision: fp32\ndeterministic: true\n";
    std::ofstream(dir_ / "run.yaml") << convoy::testing::synthetic_run_yaml(run);
  }
  void TearDown() override { fs::remove_all(dir_); }

  CommandResult convoy(const std::string& args) const {
    return convoy::testing::run_command(std::string(CONVOY_BINARY) + " train --config " + (dir_ / "run.yaml").string() +
                                        " " + args + " 2>&1");
  }
  // The model's tensors (not the optimizer's) of run `name`'s last checkpoint.
  std::map<std::string, std::vector<float>> weights(const std::string& name) const {
    std::map<std::string, std::vector<float>> out;
    for (const auto& t : convoy::read_safetensors(dir_ / "runs" / name / "last.safetensors").tensors)
      if (!t.name.starts_with("optim.")) out[t.name] = t.tensor.to_floats();
    return out;
  }
  // A shell script's status and output (both ranks started by hand, as mpirun would).
  CommandResult script(const std::string& body) const {
    std::ofstream(dir_ / "job.sh") << "set -u\ncd " << dir_.string() << "\nCONVOY=" << CONVOY_BINARY << "\n" << body;
    return convoy::testing::run_command("bash " + (dir_ / "job.sh").string() + " 2>&1");
  }

  fs::path dir_;
};

double max_abs_diff(const std::map<std::string, std::vector<float>>& a,
                    const std::map<std::string, std::vector<float>>& b, double* scale) {
  double worst = 0, big = 0;
  for (const auto& [name, values] : b) {
    const auto& other = a.at(name);
    for (size_t i = 0; i < values.size(); ++i) {
      worst = std::max(worst, std::abs(static_cast<double>(other[i]) - values[i]));
      big = std::max(big, std::abs(static_cast<double>(values[i])));
    }
  }
  *scale = big;
  return worst;
}

TEST_F(MultiGpu, TwoRanksEqualOneGpuOnTheCombinedBatch) {
  REQUIRE_TWO_GPUS();
  const CommandResult two = convoy("--gpus 2 --max-steps 6 --set name=two");
  ASSERT_EQ(two.status, 0) << two.output;
  EXPECT_NE(two.output.find("data parallel: NCCL"), std::string::npos) << two.output;
  EXPECT_NE(two.output.find("effective batch 128"), std::string::npos) << two.output;
  const CommandResult one = convoy("--max-steps 6 --set name=one --set batch_size=128");
  ASSERT_EQ(one.status, 0) << one.output;
  const CommandResult half = convoy("--max-steps 6 --set name=half --set batch_size=64");
  ASSERT_EQ(half.status, 0) << half.output;
  double scale = 0;
  const double diff = max_abs_diff(weights("two"), weights("one"), &scale);
  const double control = max_abs_diff(weights("half"), weights("one"), &scale);
  std::cout << "2 ranks vs 1 GPU at the combined batch: max |dw| " << diff << "; 1 GPU at half the batch: "
            << control << " (max |w| " << scale << ")" << std::endl;
  EXPECT_LT(diff, 1e-5 * std::max(1.0, scale));
  EXPECT_GT(control, 100 * diff);  // the comparison can tell batches apart
}

TEST_F(MultiGpu, TwoRanksWithSyncBatchNormEqualOneGpuOnTheCombinedBatch) {
  REQUIRE_TWO_GPUS();
  const std::string bn = " --set model=" + (dir_ / "net_bn.yaml").string();
  const CommandResult two = convoy("--gpus 2 --max-steps 6 --set name=two --set sync_batchnorm=true" + bn);
  ASSERT_EQ(two.status, 0) << two.output;
  EXPECT_NE(two.output.find("batch norm synchronized over the ranks"), std::string::npos) << two.output;
  const CommandResult per_gpu = convoy("--gpus 2 --max-steps 6 --set name=per_gpu" + bn);
  ASSERT_EQ(per_gpu.status, 0) << per_gpu.output;
  const CommandResult one = convoy("--max-steps 6 --set name=one --set batch_size=128" + bn);
  ASSERT_EQ(one.status, 0) << one.output;
  double scale = 0;
  const double diff = max_abs_diff(weights("two"), weights("one"), &scale);  // running statistics included
  const double control = max_abs_diff(weights("per_gpu"), weights("one"), &scale);
  std::cout << "sync_batchnorm, 2 ranks vs 1 GPU at the combined batch: max |dw| " << diff << "; per-GPU batch norm: "
            << control << " (max |w| " << scale << ")" << std::endl;
  EXPECT_LT(diff, 1e-4 * std::max(1.0, scale));
  EXPECT_GT(control, 10 * diff);
}

TEST_F(MultiGpu, AKilledRankStopsTheOtherNamingIt) {
  REQUIRE_TWO_GPUS();
  // Rank 1 is killed mid-training: rank 0 hears of it over the rendezvous connection at once,
  // aborts NCCL and exits 3, well within the timeout.
  const CommandResult r = script(R"(
export WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + $$ % 20000))
RANK=0 LOCAL_RANK=0 $CONVOY train --config run.yaml --set distributed.timeout_seconds=60 > r0.log 2>&1 & p0=$!
RANK=1 LOCAL_RANK=1 $CONVOY train --config run.yaml --set distributed.timeout_seconds=60 > r1.log 2>&1 & p1=$!
for i in $(seq 1 600); do grep -q "step 20/" r0.log && break; sleep 0.1; done
kill -9 $p1
start=$(date +%s)
wait $p0; status=$?
echo "rank 0 status $status after $(( $(date +%s) - start )) s"
tail -n 20 r0.log
)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("rank 0 status (\\d+) after (\\d+) s"))) << r.output;
  EXPECT_EQ(std::stoi(m[1]), 3) << r.output;
  EXPECT_LE(std::stoi(m[2]), 30) << r.output;
  EXPECT_NE(r.output.find("rank 1's process is gone"), std::string::npos) << r.output;
}

TEST_F(MultiGpu, AHungRankStopsTheOtherAfterTheTimeout) {
  REQUIRE_TWO_GPUS();
  // Rank 1 stops (SIGSTOP: its connections stay open): only the collective timeout can tell.
  const CommandResult r = script(R"(
export WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + $$ % 20000))
RANK=0 LOCAL_RANK=0 $CONVOY train --config run.yaml --set distributed.timeout_seconds=8 > r0.log 2>&1 & p0=$!
RANK=1 LOCAL_RANK=1 $CONVOY train --config run.yaml --set distributed.timeout_seconds=8 > r1.log 2>&1 & p1=$!
for i in $(seq 1 600); do grep -q "step 20/" r0.log && break; sleep 0.1; done
kill -STOP $p1
start=$(date +%s)
wait $p0; status=$?
echo "rank 0 status $status after $(( $(date +%s) - start )) s"
kill -9 $p1
tail -n 20 r0.log
)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("rank 0 status (\\d+) after (\\d+) s"))) << r.output;
  EXPECT_EQ(std::stoi(m[1]), 3) << r.output;
  EXPECT_GE(std::stoi(m[2]), 5) << r.output;
  EXPECT_LE(std::stoi(m[2]), 40) << r.output;
  EXPECT_NE(r.output.find("did not finish within 8 s"), std::string::npos) << r.output;
}

TEST_F(MultiGpu, SigtermCheckpointsOnceAndResumesOnOneGpu) {
  REQUIRE_TWO_GPUS();
  const CommandResult r = script(R"(
$CONVOY train --config run.yaml --gpus 2 > job.log 2>&1 & p=$!
for i in $(seq 1 600); do grep -q "step 20/" job.log && break; sleep 0.1; done
kill -TERM $p
wait $p; echo "job status $?"
cat job.log | grep -v "^epoch"
)");
  EXPECT_NE(r.output.find("job status 143"), std::string::npos) << r.output;
  size_t count = 0;
  for (size_t at = r.output.find("stopped at epoch"); at != std::string::npos; at = r.output.find("stopped at epoch", at + 1))
    ++count;
  EXPECT_EQ(count, 1u) << r.output;  // rank 0 alone writes the checkpoint
  ASSERT_TRUE(fs::exists(dir_ / "runs/ddp/last.safetensors")) << r.output;
  // The same run on one GPU: the global batch halves, the position in the epoch is converted.
  const CommandResult again = convoy("--resume --max-steps 400");
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_NE(again.output.find("resuming"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("the checkpoint was written at a global batch of 128, this run's is 64"),
            std::string::npos)
      << again.output;
}

}  // namespace

namespace {

// NCCL itself, in a world of one rank on one GPU (it runs on a one-GPU machine too): the
// rendezvous on a free port, the non-blocking communicator, the collectives ordered against
// the backend's stream, and a clean finish.
TEST(NcclCommunicator, AWorldOfOneRankOnOneGpu) {
  if (auto why = convoy::cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  std::unique_ptr<convoy::Backend> backend = convoy::make_cuda_backend(0, {});
  convoy::WorldInfo world;
  world.master_port = convoy::free_port();
  world.source = "test";
  convoy::CommunicatorOptions options;
  options.timeout = std::chrono::seconds(60);
  std::unique_ptr<convoy::Communicator> comm = convoy::make_nccl_communicator(*backend, world, options);
  EXPECT_NE(comm->describe().find("NCCL"), std::string::npos);
  std::vector<float> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * static_cast<float>(i) - 7;
  convoy::Tensor a = backend->upload(convoy::Tensor::from_floats(values, {1000}));
  convoy::Tensor b = backend->upload(convoy::Tensor::from_ints({3, -4}, {2}));
  convoy::Tensor both[] = {a, b};
  comm->all_reduce(std::span<convoy::Tensor>(both, 1), convoy::ReduceOp::avg);
  comm->all_reduce(std::span<convoy::Tensor>(both + 1, 1), convoy::ReduceOp::sum);
  comm->broadcast(a, 0);
  comm->wait();
  EXPECT_EQ(a.to_floats(), values);  // one rank: the identity
  EXPECT_EQ(b.to_floats(), (std::vector<float>{3, -4}));
  EXPECT_TRUE(comm->any(*backend, true));
  EXPECT_FALSE(comm->any(*backend, false));
  comm->barrier();
  comm->finish();
}

}  // namespace
