// OutputFile (engine/core/file_io.h), the one writer of every command's outputs: a temporary
// file beside the target, renamed over it; a failure (a full file system, an exception) leaves
// the old target and no temporary file; directories, FIFOs, devices and links to them are refused.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include "engine/core/error.h"
#include "engine/core/file_io.h"
#include "temp_dir.h"

namespace convoy {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

int temporaries(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().filename().string().find(".tmp.") != std::string::npos;
  return n;
}

// The message of the InputError `write` throws; "" when it throws none.
template <class F>
std::string input_error(F write) {
  try {
    write();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// A character device like /dev/full (1, 7) in `dir`, or "" and the reason to skip.
std::string make_device(const fs::path& path) {
  if (::mknod(path.c_str(), S_IFCHR | 0666, makedev(1, 7)) == 0) return "";
  return std::string("cannot make a device node (mknod needs root or CAP_MKNOD): ") + std::strerror(errno);
}

bool is_char_device(const fs::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}

TEST(OutputFile, WritesANewFileAndLeavesNoTemporary) {
  TempDir dir;
  write_file_atomically(dir / "a.txt", "the text", "hello\n");
  EXPECT_EQ(read_text(dir / "a.txt"), "hello\n");
  EXPECT_EQ(temporaries(dir.path()), 0);
}

TEST(OutputFile, ReplacesARegularFileKeepingItsPermissions) {
  TempDir dir;
  testing::write_text_file(dir / "a.txt", "old");
  fs::permissions(dir / "a.txt", fs::perms::owner_read | fs::perms::owner_write);
  write_file_atomically(dir / "a.txt", "the text", "new");
  EXPECT_EQ(read_text(dir / "a.txt"), "new");
  EXPECT_EQ(fs::status(dir / "a.txt").permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(temporaries(dir.path()), 0);
}

TEST(OutputFile, AnUncommittedWriteLeavesTheOldFileAndNoTemporary) {
  TempDir dir;
  testing::write_text_file(dir / "a.txt", "old");
  EXPECT_THROW(
      {
        OutputFile out(dir / "a.txt", "the text");
        out.write("half of the new");
        EXPECT_EQ(temporaries(dir.path()), 1);
        throw std::runtime_error("the producer failed");
      },
      std::runtime_error);
  EXPECT_EQ(read_text(dir / "a.txt"), "old");
  EXPECT_EQ(temporaries(dir.path()), 0);
}

TEST(OutputFile, AFullFileSystemLeavesTheOldFileAndNoTemporary) {
  // RLIMIT_FSIZE makes writes past 64 KiB fail with EFBIG (SIGXFSZ ignored, as convoy does), like a full disk.
  TempDir dir;
  testing::write_text_file(dir / "a.bin", "old");
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 64 * 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string message =
      input_error([&] { write_file_atomically(dir / "a.bin", "the data", std::string(1 << 20, 'x')); });
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(message, (dir / "a.bin").string() + ": cannot write the data: File too large");
  EXPECT_EQ(read_text(dir / "a.bin"), "old");
  EXPECT_EQ(temporaries(dir.path()), 0);
}

TEST(OutputFile, ADirectoryIsRefusedAndLeftAlone) {
  TempDir dir;
  fs::create_directory(dir / "out");
  testing::write_text_file(dir / "out/inside", "x");
  const std::string message = input_error([&] { write_file_atomically(dir / "out", "the model", "new"); });
  EXPECT_EQ(message, (dir / "out").string() +
                         ": is a directory, not a regular file; the model is written only as a new file or over a "
                         "regular file");
  EXPECT_TRUE(fs::is_directory(dir / "out"));
  EXPECT_EQ(read_text(dir / "out/inside"), "x");
  EXPECT_EQ(temporaries(dir.path()), 0);
}

TEST(OutputFile, AFifoIsRefusedWithoutBlocking) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "pipe").c_str(), 0644), 0);
  // Opening a FIFO with no reader would block: the refusal must come before any open.
  EXPECT_NE(input_error([&] { write_file_atomically(dir / "pipe", "the predictions", "1\n"); })
                .find(": is a FIFO, not a regular file"),
            std::string::npos);
  EXPECT_TRUE(fs::is_fifo(dir / "pipe"));
  EXPECT_EQ(temporaries(dir.path()), 0);
}

TEST(OutputFile, DevNullIsRefusedBeforeAnythingIsWritten) {
  // check_output_target only looks: safe on the real /dev/null whoever runs it.
  EXPECT_NE(input_error([] { check_output_target("/dev/null", "the checkpoint"); })
                .find("/dev/null: is a character device, not a regular file"),
            std::string::npos);
}

TEST(OutputFile, ADeviceNodeIsRefusedAndStaysADevice) {
  TempDir dir;
  if (const std::string why = make_device(dir / "full"); !why.empty()) GTEST_SKIP() << why;
  EXPECT_NE(input_error([&] { write_file_atomically(dir / "full", "the int8 checkpoint", "data"); })
                .find(": is a character device, not a regular file"),
            std::string::npos);
  EXPECT_TRUE(is_char_device(dir / "full"));
  EXPECT_EQ(temporaries(dir.path()), 0);
}

TEST(OutputFile, ADeviceThatAppearsBeforeTheRenameIsNotReplaced) {
  TempDir dir;
  OutputFile out(dir / "x", "the data");
  out.write("data");
  if (const std::string why = make_device(dir / "x"); !why.empty()) GTEST_SKIP() << why;
  EXPECT_NE(input_error([&] { out.commit(); }).find("is a character device"), std::string::npos);
  EXPECT_TRUE(is_char_device(dir / "x"));
}

TEST(OutputFile, ASymlinkToARegularFileReplacesThatFileAndKeepsTheLink) {
  TempDir dir;
  fs::create_directory(dir / "real");
  testing::write_text_file(dir / "real/model.onnx", "old");
  fs::create_symlink("real/model.onnx", dir / "link.onnx");
  write_file_atomically(dir / "link.onnx", "the ONNX model", "new");
  EXPECT_TRUE(fs::is_symlink(dir / "link.onnx"));
  EXPECT_EQ(read_text(dir / "real/model.onnx"), "new");
  EXPECT_EQ(temporaries(dir.path()) + temporaries(dir / "real"), 0);
  // A dangling link: the file it names is created, as writing through it would.
  fs::create_symlink("real/new.onnx", dir / "dangling.onnx");
  write_file_atomically(dir / "dangling.onnx", "the ONNX model", "fresh");
  EXPECT_TRUE(fs::is_symlink(dir / "dangling.onnx"));
  EXPECT_EQ(read_text(dir / "real/new.onnx"), "fresh");
}

TEST(OutputFile, ASymlinkToADeviceOrADirectoryIsRefused) {
  TempDir dir;
  fs::create_directory(dir / "d");
  fs::create_symlink("d", dir / "to-dir");
  EXPECT_NE(input_error([&] { write_file_atomically(dir / "to-dir", "the data", "x"); })
                .find((dir / "to-dir").string() + ": is a symlink to " + (dir / "d").string() + ", a directory"),
            std::string::npos);
  if (const std::string why = make_device(dir / "full"); !why.empty()) GTEST_SKIP() << why;
  fs::create_symlink(dir / "full", dir / "to-dev");
  EXPECT_NE(input_error([&] { write_file_atomically(dir / "to-dev", "the data", "x"); }).find("a character device"),
            std::string::npos);
  EXPECT_TRUE(is_char_device(dir / "full"));
  EXPECT_TRUE(fs::is_symlink(dir / "to-dev"));
  EXPECT_EQ(temporaries(dir.path()), 0);
}

TEST(OutputFile, TwoWritersOfOneTargetTakeDistinctTemporaries) {
  TempDir dir;
  OutputFile a(dir / "x", "the data"), b(dir / "x", "the data");
  a.write("first");
  b.write("second");
  EXPECT_EQ(temporaries(dir.path()), 2);
  a.commit();
  b.commit();
  EXPECT_EQ(read_text(dir / "x"), "second");
  EXPECT_EQ(temporaries(dir.path()), 0);
}

TEST(OutputFile, AMissingDirectoryIsAnInputErrorNamingTheFile) {
  TempDir dir;
  const std::string message = input_error([&] { write_file_atomically(dir / "no/x.yaml", "the model YAML", "x"); });
  EXPECT_EQ(message.rfind((dir / "no/x.yaml").string() + ": cannot write the model YAML: cannot create ", 0), 0u)
      << message;
  EXPECT_NE(message.find("No such file or directory"), std::string::npos) << message;
}

}  // namespace
}  // namespace convoy
