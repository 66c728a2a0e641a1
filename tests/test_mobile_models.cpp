// The shipped mobile models (models/mobilenet_v2.yaml, mobilenet_v3_small.yaml,
// efficientnet_b0.yaml) are what models/generate_mobilenets.py writes, byte for byte, so the
// script stays the one place their architecture is written; and each builds with torchvision's
// parameter count (the state-dict and logits checks are test_init_weights.cpp's).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "engine/graph/model.h"
#include "run_command.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(MobileModels, ShippedYamlsAreTheGeneratorsOutput) {
  const convoy::testing::TempDir dir("convoy-mobile-models");
  const std::string source = CONVOY_SOURCE_DIR;
  const convoy::testing::CommandResult r =
      convoy::testing::run_command("python3 " + source + "/models/generate_mobilenets.py " + dir.path().string() + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* name : {"mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0"}) {
    SCOPED_TRACE(name);
    const std::string shipped = read_text(source + "/models/" + name + ".yaml");
    ASSERT_FALSE(shipped.empty());
    EXPECT_EQ(read_text(dir / (std::string(name) + ".yaml")), shipped)
        << "models/" << name << ".yaml differs from generate_mobilenets.py's output: edit the script and rerun it";
  }
}

TEST(MobileModels, BuildWithTorchvisionsParameterCounts) {
  const std::string models = std::string(CONVOY_SOURCE_DIR) + "/models/";
  for (const auto& [name, parameters] : {std::pair{"mobilenet_v2", 3'504'872}, std::pair{"mobilenet_v3_small", 2'542'856},
                                         std::pair{"efficientnet_b0", 5'288'548}}) {
    const convoy::Model m = convoy::Model::from_file(models + name + ".yaml", 1);
    EXPECT_EQ(m.parameter_count(), parameters) << name;  // torchvision's sum(p.numel() for p in parameters())
    EXPECT_EQ(m.num_classes(), 1000) << name;
  }
}

}  // namespace
