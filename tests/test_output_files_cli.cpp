// The commands' outputs through the `convoy` binary (issue 39): a write that fails on a full file
// system (`ulimit -f`) exits 1 naming the file, leaves the previous file byte for byte and no
// temporary file; a failed import leaves no YAML; a device, FIFO or directory in the way of an
// output is refused at once and left as it was.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "reliability_fixtures.h"
#include "run_command.h"
#include "temp_dir.h"

namespace convoy {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::TempDir;

const std::string kLenet = std::string(CONVOY_SOURCE_DIR) + "/models/lenet5.yaml";

// export and import need the ONNX build; GTEST_SKIP returns from the test itself, hence a macro.
#ifdef CONVOY_HAVE_ONNX
#define NEED_ONNX() (void)0
#else
#define NEED_ONNX() GTEST_SKIP() << "built without ONNX (CONVOY_ONNX=OFF, or libonnx-dev/libprotobuf-dev missing)"
#endif

class OutputFilesCli : public ::testing::Test {
 protected:
  static CommandResult convoy(const std::string& args) {
    return testing::run_command("timeout 120 " + std::string(CONVOY_BINARY) + " " + args + " 2>&1");
  }
  // convoy ARGS with files limited to `kib` KiB: writes past it fail with EFBIG, as on a full disk.
  static CommandResult convoy_limited(int kib, const std::string& args) {
    return testing::run_command("bash -c 'ulimit -f " + std::to_string(kib) + "; exec timeout 120 " +
                                std::string(CONVOY_BINARY) + " " + args + "' 2>&1");
  }
  int temporaries() const {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir_.path()))
      n += e.path().filename().string().find(".tmp.") != std::string::npos;
    return n;
  }
  TempDir dir_{"convoy-output-cli"};
};

// A regular file's bytes.
std::string bytes_of(const fs::path& path) { return testing::tiny_run::read_text(path); }

TEST_F(OutputFilesCli, ExportOnAFullFileSystemKeepsThePreviousOnnx) {
  NEED_ONNX();
  const fs::path onnx = dir_ / "m.onnx";
  CommandResult r = convoy("export --model " + kLenet + " --seed 0 -o " + onnx.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string before = bytes_of(onnx);
  ASSERT_GT(before.size(), 64u * 1024);
  r = convoy_limited(16, "export --model " + kLenet + " --seed 1 -o " + onnx.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("convoy: error: " + onnx.string() + ": cannot write the ONNX model: File too large"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(bytes_of(onnx), before);
  EXPECT_EQ(temporaries(), 0);
}

TEST_F(OutputFilesCli, AFailedImportLeavesNoYaml) {
  NEED_ONNX();
  const fs::path onnx = dir_ / "m.onnx";
  CommandResult r = convoy("export --model " + kLenet + " --seed 0 -o " + onnx.string());
  ASSERT_EQ(r.status, 0) << r.output;
  // The YAML fits under the limit, the weights (~250 KB) do not.
  r = convoy_limited(16, "import " + onnx.string() + " -o " + (dir_ / "new.yaml").string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find((dir_ / "new.safetensors").string() + ": cannot write the checkpoint: File too large"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "new.yaml"));
  EXPECT_FALSE(fs::exists(dir_ / "new.safetensors"));
  // Over an earlier import's files: both stay as they were.
  testing::write_text_file(dir_ / "old.yaml", "name: old\n");
  testing::write_text_file(dir_ / "old.safetensors", "old weights");
  r = convoy_limited(16, "import " + onnx.string() + " -o " + (dir_ / "old.yaml").string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(bytes_of(dir_ / "old.yaml"), "name: old\n");
  EXPECT_EQ(bytes_of(dir_ / "old.safetensors"), "old weights");
  EXPECT_EQ(temporaries(), 0);
}

TEST_F(OutputFilesCli, QuantizeOntoADeviceNodeIsRefusedAndTheNodeStays) {
  const fs::path node = dir_ / "full";
  if (::mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0)
    GTEST_SKIP() << "cannot make a device node (mknod needs root or CAP_MKNOD): " << std::strerror(errno);
  // Refused before the model is even read: no calibration spent on an output that cannot be written.
  const CommandResult r = convoy("quantize --model " + (dir_ / "fp32.safetensors").string() +
                                 " --calibration fashion-mnist:train -o " + node.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("convoy: error: " + node.string() + ": is a character device, not a regular file; the "
                          "int8 checkpoint is written only as a new file or over a regular file"),
            std::string::npos)
      << r.output;
  struct stat st {};
  ASSERT_EQ(::lstat(node.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_rdev, makedev(1, 7));
}

TEST_F(OutputFilesCli, ExportOntoADirectoryOrAFifoIsRefused) {
  NEED_ONNX();
  fs::create_directory(dir_ / "out.onnx");
  CommandResult r = convoy("export --model " + kLenet + " -o " + (dir_ / "out.onnx").string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("out.onnx: is a directory, not a regular file"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::is_directory(dir_ / "out.onnx"));
  ASSERT_EQ(::mkfifo((dir_ / "pipe.onnx").c_str(), 0644), 0);
  r = convoy("export --model " + kLenet + " -o " + (dir_ / "pipe.onnx").string());
  EXPECT_EQ(r.status, 1) << r.output;  // not 124: nothing waits for a reader
  EXPECT_NE(r.output.find("pipe.onnx: is a FIFO, not a regular file"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::is_fifo(dir_ / "pipe.onnx"));
}

// metrics.csv is appended to row by row, not replaced; still never a FIFO (the run would block
// on it, as it did) nor a device. A checkpoint's target in the way fails before any training.
TEST_F(OutputFilesCli, TrainingRefusesAMetricsFifoOrACheckpointDirectoryAtOnce) {
  const fs::path config = testing::tiny_run::write_tiny_config(dir_.path(), 1);
  fs::create_directories(dir_ / "runs/tiny");
  ASSERT_EQ(::mkfifo((dir_ / "runs/tiny/metrics.csv").c_str(), 0644), 0);
  CommandResult r = convoy("train --config " + config.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("metrics.csv: is a FIFO, not a regular file; the metrics file is written only"),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(fs::is_fifo(dir_ / "runs/tiny/metrics.csv"));
  fs::remove(dir_ / "runs/tiny/metrics.csv");
  fs::create_directory(dir_ / "runs/tiny/best.safetensors");
  r = convoy("train --config " + config.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("best.safetensors: is a directory, not a regular file"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("epoch 1/1"), std::string::npos) << r.output;  // refused before training
}

}  // namespace
}  // namespace convoy
