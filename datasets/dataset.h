#pragma once
// Datasets: indexed, labelled images that the DataLoader preprocesses into batches. In-memory
// ones (IDX, CIFAR, synthetic) hold decoded pixels; file ones (image folders, CSV manifests)
// decode each sample when it is loaded.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "datasets/preprocess.h"
#include "engine/core/error.h"
#include "engine/core/tensor.h"

namespace convoy {

// A sample that cannot be read (a corrupt or non-image file): with `on_bad_image: skip` the
// loader leaves it out of its batch and counts it instead of stopping the run.
class BadSampleError : public InputError {
 public:
  using InputError::InputError;
};

class Dataset {
 public:
  Dataset(std::string name, std::vector<std::string> class_names)
      : name_(std::move(name)), class_names_(std::move(class_names)) {}
  virtual ~Dataset() = default;
  Dataset(const Dataset&) = delete;
  Dataset& operator=(const Dataset&) = delete;

  const std::string& name() const { return name_; }  // "fashion-mnist:train", for messages
  const std::vector<std::string>& class_names() const { return class_names_; }  // index = label
  virtual int64_t size() const = 0;
  virtual int32_t label(int64_t index) const = 0;  // in [0, class_names().size())
  // (C, H, W) when every sample is stored at one size (in-memory data), else nullopt.
  virtual std::optional<Shape> stored_shape() const { return std::nullopt; }
  // Sample `index` preprocessed into `out`, (p.channels, p.height, p.width) u8. `seed` drives
  // the random crop in train mode. Thread-safe: the loader's workers call it concurrently. A
  // sample that cannot be read throws BadSampleError naming the file.
  virtual void load(int64_t index, const Preprocess& p, SampleMode mode, uint64_t seed, uint8_t* out) const = 0;

 private:
  std::string name_;
  std::vector<std::string> class_names_;
};

// Decoded images in memory: IDX files, CIFAR binaries. A sample whose stored shape is the
// model's input and that needs no crop is copied as it is.
class TensorDataset : public Dataset {
 public:
  // images (N, C, H, W) u8 on the CPU; labels (N) i32, each in [0, class_names.size()).
  TensorDataset(std::string name, std::vector<std::string> class_names, Tensor images, Tensor labels);
  int64_t size() const override { return labels_.dim(0); }
  int32_t label(int64_t index) const override { return labels_.data<int32_t>()[index]; }
  std::optional<Shape> stored_shape() const override;
  void load(int64_t index, const Preprocess& p, SampleMode mode, uint64_t seed, uint8_t* out) const override;
  const Tensor& images() const { return images_; }  // (N, C, H, W) u8
  const Tensor& labels() const { return labels_; }  // (N) i32

 private:
  Tensor images_;  // (N, C, H, W) u8
  Tensor labels_;  // (N) i32
};

// Image files decoded when loaded (datasets/image_folder.cpp).
class FileDataset : public Dataset {
 public:
  struct Sample {
    std::filesystem::path path;
    int32_t label = 0;
  };
  FileDataset(std::string name, std::vector<std::string> class_names, std::vector<Sample> samples);
  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  int32_t label(int64_t index) const override { return samples_[static_cast<size_t>(index)].label; }
  void load(int64_t index, const Preprocess& p, SampleMode mode, uint64_t seed, uint8_t* out) const override;
  const std::vector<Sample>& samples() const { return samples_; }
  // Sample `index`'s file bytes into `bytes` (resized to the file), for a BatchDecoder; an
  // unreadable or oversized file throws BadSampleError naming it.
  void read_bytes(int64_t index, std::vector<uint8_t>& bytes) const;

 private:
  std::vector<Sample> samples_;
};

// Where Debian's dataset-fashion-mnist package installs the files.
inline constexpr std::string_view kFashionMnistDefaultPath = "/usr/share/datasets/fashion-mnist";

// Reads {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] from `dir`. split: "train" or
// "test"; limit: 0 = all samples, else the first `limit`. Images come out as (N, 1, 28, 28).
// data_volume: DatasetSpec::data_volume, for the error when the files are missing.
std::unique_ptr<TensorDataset> load_fashion_mnist(const std::filesystem::path& dir, std::string_view split,
                                                  int64_t limit = 0, std::string_view data_volume = {});
// The same files and format with the digit class names "0" ... "9".
std::unique_ptr<TensorDataset> load_mnist(const std::filesystem::path& dir, std::string_view split,
                                          int64_t limit = 0, std::string_view data_volume = {});
// CIFAR's binary version: {data_batch_1..5,test_batch}.bin (cifar10, with batches.meta.txt for
// the class names) or {train,test}.bin (cifar100, fine labels, fine_label_names.txt), in `dir`
// or its cifar-10-batches-bin / cifar-100-binary subdirectory. Images (N, 3, 32, 32).
std::unique_ptr<TensorDataset> load_cifar(std::string_view kind, const std::filesystem::path& dir,
                                          std::string_view split, int64_t limit = 0);
// torchvision's ImageFolder: ROOT/<split>/<class>/*.{jpg,jpeg,png}, classes from the sorted
// directory names. An empty class directory or a split without classes is an InputError.
std::unique_ptr<FileDataset> load_image_folder(const std::filesystem::path& root, std::string_view split,
                                               int64_t limit = 0);
// A CSV manifest of `path,label` lines (paths relative to the manifest, labels class names or
// indices; an optional header line `path,label`). `split` names the manifest: ROOT/<split>.csv,
// or `manifest` itself when it is a file.
std::unique_ptr<FileDataset> load_csv_manifest(const std::filesystem::path& manifest, std::string_view split,
                                               int64_t limit = 0);
// Random images of `shape` (C, H, W) with `classes` labels, generated when loaded (no memory
// per sample), the same for the same (seed, index). For benchmarks and tests.
std::unique_ptr<Dataset> make_synthetic(Shape shape, int64_t classes, int64_t size, uint64_t seed);

// What a run config names: kind, path, split, limit, and for `synthetic` the shape and size.
struct DatasetSpec {
  std::string kind = "fashion-mnist";  // a name in kDatasetKinds
  std::filesystem::path path;  // empty: the kind's default location
  Shape synthetic_shape = {3, 224, 224};
  int64_t synthetic_classes = 1000;
  int64_t synthetic_size = 0;  // per split; 0 = 50,000 train / 10,000 test
  // Inside a container: where it mounts the datasets volume (EngineOptions::data_volume; our
  // images set it), so that a missing dataset's error says how to mount it; empty elsewhere.
  std::string data_volume = {};
};
// The dataset of spec.kind, one of kDatasetKinds (engine/config/dataset_kinds.h); another name is
// an InputError listing them.
std::unique_ptr<Dataset> load_dataset(const DatasetSpec& spec, std::string_view split, int64_t limit = 0);

}  // namespace convoy
