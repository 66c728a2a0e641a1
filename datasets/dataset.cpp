#include "datasets/dataset.h"

#include <algorithm>
#include <cstdlib>

#include "datasets/idx.h"
#include "engine/core/file_io.h"
#include "engine/core/error.h"

namespace convoy {
namespace {

const std::vector<std::string>& fashion_mnist_classes() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress",
                                                 "Coat",        "Sandal",  "Shirt",    "Sneaker",
                                                 "Bag",         "Ankle boot"};
  return names;
}

const std::vector<std::string>& digit_classes() {
  static const std::vector<std::string> names = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
  return names;
}

// `stem` with ".gz" if that exists, else without; the missing-file error names both.
std::filesystem::path find_idx_file(const std::filesystem::path& dir, const std::string& stem,
                                    std::string_view hint) {
  std::filesystem::path gz = dir / (stem + ".gz"), raw = dir / stem;
  std::error_code ec;
  if (std::filesystem::exists(gz, ec)) return gz;
  if (std::filesystem::exists(raw, ec)) return raw;
  if (!std::filesystem::is_directory(dir, ec))
    throw InputError(file_message(dir, "no such directory" + std::string(hint)));
  throw InputError(file_message(raw.string() + "[.gz]", "no such file" + std::string(hint)));
}

// The MNIST file layout, shared by MNIST and Fashion-MNIST.
Dataset load_mnist_format(std::string_view kind, const std::filesystem::path& dir,
                          std::string_view split, int64_t limit,
                          const std::vector<std::string>& classes, std::string_view hint) {
  if (split != "train" && split != "test")
    throw InputError(std::string(kind) + ": unknown split '" + std::string(split) +
                     "' (expected train or test)");
  if (limit < 0)
    throw InputError(std::string(kind) + ": limit must be >= 0 (0 = all samples), got " +
                     std::to_string(limit));
  const std::string prefix = split == "train" ? "train" : "t10k";
  const auto images_path = find_idx_file(dir, prefix + "-images-idx3-ubyte", hint);
  const auto labels_path = find_idx_file(dir, prefix + "-labels-idx1-ubyte", hint);

  Tensor images = read_idx(images_path).data;  // (N, H, W)
  if (images.ndim() != 3)
    throw InputError(file_message(images_path, "expected 3 IDX dims (N, H, W) for images, found " +
                                                   shape_str(images.shape())));
  if (images.dim(1) == 0 || images.dim(2) == 0)
    throw InputError(file_message(images_path, "images of size " + std::to_string(images.dim(1)) +
                                                   "x" + std::to_string(images.dim(2)) +
                                                   " are empty, expected positive height and width"));
  Tensor labels_u8 = read_idx(labels_path).data;  // (N)
  if (labels_u8.ndim() != 1)
    throw InputError(file_message(labels_path, "expected 1 IDX dim (N) for labels, found " +
                                                   shape_str(labels_u8.shape())));
  const int64_t n = images.dim(0);
  if (labels_u8.dim(0) != n)
    throw InputError(file_message(labels_path, "has " + std::to_string(labels_u8.dim(0)) +
                                                   " labels but " + images_path.string() +
                                                   " has " + std::to_string(n) + " images"));
  const int64_t count = limit == 0 ? n : std::min(limit, n);
  const int64_t num_classes = static_cast<int64_t>(classes.size());

  Dataset ds;
  ds.name = std::string(kind) + ":" + std::string(split);
  ds.class_names = classes;
  ds.labels = Tensor::empty({count}, DType::i32);
  const uint8_t* src = labels_u8.data<uint8_t>();
  int32_t* dst = ds.labels.data<int32_t>();
  for (int64_t i = 0; i < count; ++i) {
    if (src[i] >= num_classes)
      throw InputError(file_message(labels_path, "label " + std::to_string(src[i]) + " at index " +
                                                     std::to_string(i) + " is out of range (expected 0 to " +
                                                     std::to_string(num_classes - 1) + ")"));
    dst[i] = src[i];
  }
  // A limited load copies its rows so the full file's buffer is freed.
  Tensor kept = count == n ? images : images.slice_rows(0, count).clone();
  ds.images = kept.reshape({count, 1, images.dim(1), images.dim(2)});
  return ds;
}

// Our images set CONVOY_DATA_VOLUME to the mount point of the datasets volume (/data): inside
// a container, the fix for missing data is a -v flag on the host, not a package install.
std::string missing_data_hint(std::string_view outside_container) {
  const char* volume = std::getenv("CONVOY_DATA_VOLUME");
  if (!volume || !*volume) return std::string(outside_container);
  const std::string v(volume);
  return "; this container reads datasets from the volume " + v + ": mount the host's datasets there, " +
         "e.g. docker run -v /usr/share/datasets:" + v + ":ro ... (on the host: apt-get install " +
         "dataset-fashion-mnist), or set dataset.path to a mounted directory";
}

}  // namespace

Dataset load_fashion_mnist(const std::filesystem::path& dir, std::string_view split, int64_t limit) {
  return load_mnist_format("fashion-mnist", dir, split, limit, fashion_mnist_classes(),
                           missing_data_hint("; install Debian's dataset-fashion-mnist or set dataset.path"));
}

Dataset load_mnist(const std::filesystem::path& dir, std::string_view split, int64_t limit) {
  return load_mnist_format("mnist", dir, split, limit, digit_classes(),
                           missing_data_hint("; set dataset.path to the directory holding the MNIST files"));
}

std::vector<std::string> dataset_kinds() { return {"fashion-mnist", "mnist"}; }

Dataset load_dataset(std::string_view kind, const std::filesystem::path& path,
                     std::string_view split, int64_t limit) {
  if (kind == "fashion-mnist")
    return load_fashion_mnist(path.empty() ? std::filesystem::path(kFashionMnistDefaultPath) : path,
                              split, limit);
  if (kind == "mnist") {
    if (path.empty()) throw InputError("mnist: no default location; set dataset.path");
    return load_mnist(path, split, limit);
  }
  std::string known;
  for (const auto& k : dataset_kinds()) known += (known.empty() ? "" : ", ") + k;
  throw InputError("unknown dataset kind '" + std::string(kind) + "' (known: " + known + ")");
}

}  // namespace convoy
