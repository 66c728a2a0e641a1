// The model repository's config.yaml: defaults, every key, sizes, version policies, and errors
// that name file:line and the key.
#include <gtest/gtest.h>

#include "apps/serve/model_config.h"
#include "engine/core/error.h"
#include "tests/temp_dir.h"

namespace {

using convoy::serve::ModelConfig;
using convoy::serve::VersionPolicy;

ModelConfig read(const convoy::testing::TempDir& dir, const std::string& text) {
  const auto path = dir / "config.yaml";
  convoy::testing::write_text_file(path, text);
  return convoy::serve::read_model_config(path.string(), "m");
}

std::string error_of(const convoy::testing::TempDir& dir, const std::string& text) {
  try {
    read(dir, text);
  } catch (const convoy::InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ServeConfig, ReadsEveryKeyAndDefaultsTheRest) {
  convoy::testing::TempDir dir;
  const ModelConfig d = convoy::serve::read_model_config((dir / "absent.yaml").string(), "m");
  EXPECT_EQ(d.max_batch_size, 8);
  EXPECT_FALSE(d.dynamic_batching);
  EXPECT_EQ(d.version_policy.kind, VersionPolicy::Kind::latest);
  EXPECT_EQ(d.version_policy.latest, 1);
  const ModelConfig c = read(dir,
                             "max_batch_size: 32\n"
                             "dynamic_batching: {max_queue_delay_microseconds: 500, preferred_batch_size: [16, 8],\n"
                             "                   max_queue_size: 10, default_timeout_microseconds: 2000}\n"
                             "instance_count: 2\ndevice: cuda:1\nthreads: 4\nmax_memory: 1.5GiB\nprecision: bf16\n"
                             "version_policy: {specific: [3, 1]}\n");
  EXPECT_EQ(c.max_batch_size, 32);
  EXPECT_TRUE(c.dynamic_batching);
  EXPECT_EQ(c.max_queue_delay_us, 500);
  EXPECT_EQ(c.preferred_batch_size, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(c.max_queue_size, 10);
  EXPECT_EQ(c.default_timeout_us, 2000);
  EXPECT_EQ(c.instance_count, 2);
  EXPECT_EQ(c.device, "cuda:1");
  EXPECT_EQ(c.threads, 4);
  EXPECT_EQ(c.precision, convoy::Precision::bf16);
  EXPECT_FALSE(d.precision.has_value());  // auto
  EXPECT_EQ(c.max_memory, uint64_t{3} << 29);
  EXPECT_EQ(c.version_policy.kind, VersionPolicy::Kind::specific);
  EXPECT_EQ(c.version_policy.specific, (std::vector<int64_t>{1, 3}));
}

TEST(ServeConfig, MemorySizes) {
  EXPECT_EQ(convoy::serve::parse_memory_size("2GiB"), int64_t{2} << 30);
  EXPECT_EQ(convoy::serve::parse_memory_size("512MiB"), int64_t{512} << 20);
  EXPECT_EQ(convoy::serve::parse_memory_size("3KB"), 3000);
  EXPECT_EQ(convoy::serve::parse_memory_size("4096"), 4096);
  EXPECT_EQ(convoy::serve::parse_memory_size("2 GiB"), int64_t{2} << 30);
  EXPECT_EQ(convoy::serve::parse_memory_size("2 gigs"), -1);
  EXPECT_EQ(convoy::serve::parse_memory_size("-1GiB"), -1);
  EXPECT_EQ(convoy::serve::parse_memory_size("lots"), -1);
}

TEST(ServeConfig, VersionPoliciesSelectFromTheFolders) {
  const std::vector<int64_t> folders = {1, 2, 5, 9};
  VersionPolicy p;
  EXPECT_EQ(convoy::serve::select_versions(p, folders), (std::vector<int64_t>{9}));
  p.latest = 3;
  EXPECT_EQ(convoy::serve::select_versions(p, folders), (std::vector<int64_t>{2, 5, 9}));
  p.latest = 10;
  EXPECT_EQ(convoy::serve::select_versions(p, folders), folders);
  p.kind = VersionPolicy::Kind::all;
  EXPECT_EQ(convoy::serve::select_versions(p, folders), folders);
  p.kind = VersionPolicy::Kind::specific;
  p.specific = {2, 3, 9};
  EXPECT_EQ(convoy::serve::select_versions(p, folders), (std::vector<int64_t>{2, 9}));
  EXPECT_TRUE(convoy::serve::select_versions(p, {}).empty());
}

TEST(ServeConfig, ErrorsNameTheLineAndTheKey) {
  convoy::testing::TempDir dir;
  EXPECT_NE(error_of(dir, "max_batch_size: 4\nmax_batch: 8\n").find("config.yaml:2: max_batch: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of(dir, "max_batch_size: 0\n").find("max_batch_size: expected 1 to 65536"), std::string::npos);
  EXPECT_NE(error_of(dir, "dynamic_batching: {max_delay: 5}\n").find("dynamic_batching.max_delay: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of(dir, "max_batch_size: 4\ndynamic_batching: {preferred_batch_size: [8]}\n")
                .find("preferred_batch_size: expected whole numbers from 1 to max_batch_size (4)"),
            std::string::npos);
  EXPECT_NE(error_of(dir, "device: tpu\n").find("device: expected auto, cpu, cuda or cuda:N"), std::string::npos);
  EXPECT_NE(error_of(dir, "precision: fp16\n").find("config.yaml:1: precision: expected auto, fp32, bf16, tf32, int8 or fp8"),
            std::string::npos);
  EXPECT_NE(error_of(dir, "max_memory: lots\n").find("max_memory: expected a size such as 2GiB"), std::string::npos);
  EXPECT_NE(error_of(dir, "version_policy: {latest: 1, all: true}\n").find("give exactly one of"), std::string::npos);
  EXPECT_NE(error_of(dir, "version_policy: {specific: []}\n").find("non-empty list"), std::string::npos);
  EXPECT_NE(error_of(dir, "version_policy: {latest: 0}\n").find("latest: expected at least 1"), std::string::npos);
  EXPECT_NE(error_of(dir, "instance_count: 100\n").find("instance_count: expected 1 to 64"), std::string::npos);
}

}  // namespace
