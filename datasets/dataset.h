#pragma once
// In-memory datasets: images and labels on the CPU, ready for the DataLoader.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/tensor.h"

namespace convoy {

struct Dataset {
  std::string name;                      // "fashion-mnist:train"
  Tensor images;                         // (N, C, H, W) u8 on the CPU
  Tensor labels;                         // (N) i32 on the CPU, each in [0, class_names.size())
  std::vector<std::string> class_names;  // index = label

  int64_t size() const { return labels.defined() ? labels.dim(0) : 0; }
};

// Where Debian's dataset-fashion-mnist package installs the files.
inline constexpr std::string_view kFashionMnistDefaultPath = "/usr/share/datasets/fashion-mnist";

// Reads {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] from `dir`. split: "train" or
// "test"; limit: 0 = all samples, else the first `limit`. Images come out as (N, 1, 28, 28).
Dataset load_fashion_mnist(const std::filesystem::path& dir, std::string_view split,
                           int64_t limit = 0);
// The same files and format with the digit class names "0" ... "9".
Dataset load_mnist(const std::filesystem::path& dir, std::string_view split, int64_t limit = 0);

// kind: "fashion-mnist" or "mnist". An empty `path` means the kind's default location
// (Fashion-MNIST: kFashionMnistDefaultPath). Unknown kinds are an InputError listing the
// known ones.
Dataset load_dataset(std::string_view kind, const std::filesystem::path& path,
                     std::string_view split, int64_t limit = 0);
// The kinds load_dataset accepts, for messages and `convoy doctor`.
std::vector<std::string> dataset_kinds();

}  // namespace convoy
