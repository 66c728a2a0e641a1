// dataset.decoder and dataset.nvjpeg_workers: read from the run config, and which decoder a run
// gets (engine/train/run_setup.h). The nvJPEG decoding itself is tested in tests/nvjpeg/.
#include <gtest/gtest.h>

#include <sstream>

#include "datasets/dataset.h"
#include "datasets/nvjpeg.h"
#include "engine/backends/backend.h"
#include "engine/config/run_config.h"
#include "engine/core/error.h"
#include "engine/train/run_setup.h"

namespace convoy {
namespace {

RunConfig parse(const std::string& text) {
  return parse_run_config(text, "run.yaml", std::string(CONVOY_SOURCE_DIR) + "/models", {});
}

TEST(DecoderChoice, ConfigKeys) {
  EXPECT_EQ(parse("model: lenet5.yaml\n").dataset.decoder, "auto");
  EXPECT_EQ(parse("model: lenet5.yaml\n").dataset.nvjpeg_workers, 0);
  const RunConfig c = parse("model: lenet5.yaml\ndataset: {decoder: nvjpeg, nvjpeg_workers: 4}\n");
  EXPECT_EQ(c.dataset.decoder, "nvjpeg");
  EXPECT_EQ(c.dataset.nvjpeg_workers, 4);
  try {
    parse("model: lenet5.yaml\ndataset: {decoder: gpu}\n");
    FAIL() << "decoder: gpu was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("dataset.decoder: 'gpu' is not one of: auto, cpu, nvjpeg"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(parse("model: lenet5.yaml\ndataset: {nvjpeg_workers: -1}\n"), InputError);
}

// On the CPU: auto and cpu decode on the workers; nvjpeg is an error that names the key and why.
TEST(DecoderChoice, CpuRunsDecodeOnTheWorkers) {
  const std::unique_ptr<Backend> cpu = make_cpu_backend({});
  const FileDataset files("files", {"a"}, {{"x.jpg", 0}});
  std::ostringstream log;
  RunConfig c = parse("model: lenet5.yaml\n");
  EXPECT_EQ(training_batch_decoder(c, {}, files, *cpu, log), nullptr);
  c.dataset.decoder = "cpu";
  EXPECT_EQ(training_batch_decoder(c, {}, files, *cpu, log), nullptr);
  c.dataset.decoder = "nvjpeg";
  try {
    training_batch_decoder(c, {}, files, *cpu, log);
    FAIL() << "dataset.decoder: nvjpeg was accepted on the CPU";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("dataset.decoder: nvjpeg cannot be used: the run is on cpu"),
              std::string::npos)
        << e.what();
  }
  // In-memory data has nothing to decode, whatever the choice.
  const std::unique_ptr<Dataset> synthetic = make_synthetic({3, 8, 8}, 2, 4, 1);
  EXPECT_EQ(training_batch_decoder(c, {}, *synthetic, *cpu, log), nullptr);
}

// auto on a host with many cores: the CPU workers decode (they feed a GPU alone and take none of
// its time), said in the log on a CUDA run; with fewer workers a CUDA run takes nvJPEG where it
// is there (tests/nvjpeg/).
TEST(DecoderChoice, AutoKeepsTheCpuDecodersWhereTheLoaderHasManyWorkers) {
  const FileDataset files("files", {"a"}, {{"x.jpg", 0}});
  RunConfig c = parse("model: lenet5.yaml\n");
  c.dataset.workers = kCpuDecodersEnough;
  EXPECT_EQ(loader_workers(c, files), kCpuDecodersEnough);
  std::ostringstream log;
  const std::unique_ptr<Backend> cpu = make_cpu_backend({});
  EXPECT_EQ(training_batch_decoder(c, {}, files, *cpu, log), nullptr);
  if (cuda_unavailable_reason().empty()) {
    const std::unique_ptr<Backend> gpu = make_cuda_backend(0, {});
    EXPECT_EQ(training_batch_decoder(c, {}, files, *gpu, log), nullptr);
    EXPECT_NE(log.str().find("decoding training images on the CPU (12 workers"), std::string::npos) << log.str();
  }
}

}  // namespace
}  // namespace convoy
