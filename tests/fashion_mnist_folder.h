#pragma once
// A Fashion-MNIST colour JPEG folder (train/<class>, val/<class>) written for a test by
// scripts/datasets/fashion_mnist_to_folder.py, the way a user brings their own photos.
#include <cstdlib>
#include <filesystem>
#include <string>

#include "datasets/dataset.h"
#include "run_command.h"

namespace convoy::testing {

// Why the folder cannot be written here, for GTEST_SKIP; empty when it can.
inline std::string fashion_mnist_folder_unavailable() {
  const std::string fmnist = std::string(convoy::kFashionMnistDefaultPath);
  if (!std::filesystem::exists(fmnist + "/train-images-idx3-ubyte.gz"))
    return "Fashion-MNIST is not installed at " + fmnist + " (sudo bash scripts/setup.sh)";
  if (std::system("/usr/bin/python3 -c 'import numpy, PIL' >/dev/null 2>&1") != 0)
    return "/usr/bin/python3 with numpy and Pillow is needed to write the image folder "
           "(sudo bash scripts/setup.sh installs python3-numpy and python3-pil)";
  return "";
}

// Writes the first train_limit and test_limit images at size x size under root.
inline CommandResult write_fashion_mnist_folder(const std::filesystem::path& root, int train_limit, int test_limit,
                                                int size) {
  return run_command("/usr/bin/python3 " + std::string(CONVOY_SOURCE_DIR) +
                     "/scripts/datasets/fashion_mnist_to_folder.py --out " + root.string() + " --train-limit " +
                     std::to_string(train_limit) + " --test-limit " + std::to_string(test_limit) + " --size " +
                     std::to_string(size) + " 2>&1");
}

}  // namespace convoy::testing
