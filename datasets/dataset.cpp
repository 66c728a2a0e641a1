#include "datasets/dataset.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "datasets/idx.h"
#include "engine/config/dataset_kinds.h"
#include "engine/core/counter_rng.h"
#include "engine/core/error.h"
#include "engine/core/file_io.h"

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
std::unique_ptr<TensorDataset> load_mnist_format(std::string_view kind, const std::filesystem::path& dir,
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

  Tensor labels = Tensor::empty({count}, DType::i32);  // (N)
  const uint8_t* src = labels_u8.data<uint8_t>();
  int32_t* dst = labels.data<int32_t>();
  for (int64_t i = 0; i < count; ++i) {
    if (src[i] >= num_classes)
      throw InputError(file_message(labels_path, "label " + std::to_string(src[i]) + " at index " +
                                                     std::to_string(i) + " is out of range (expected 0 to " +
                                                     std::to_string(num_classes - 1) + ")"));
    dst[i] = src[i];
  }
  // A limited load copies its rows so the full file's buffer is freed.
  Tensor kept = count == n ? images : images.slice_rows(0, count).clone();
  return std::make_unique<TensorDataset>(std::string(kind) + ":" + std::string(split), classes,
                                         kept.reshape({count, 1, images.dim(1), images.dim(2)}), labels);
}

// `volume`: the mount point of the datasets volume (/data in our images), empty outside a
// container. Inside one, the fix for missing data is a -v flag on the host, not a package install.
std::string missing_data_hint(std::string_view outside_container, std::string_view volume) {
  if (volume.empty()) return std::string(outside_container);
  const std::string v(volume);
  return "; this container reads datasets from the volume " + v + ": mount the host's datasets there, " +
         "e.g. docker run -v /usr/share/datasets:" + v + ":ro ... (on the host: apt-get install " +
         "dataset-fashion-mnist), or set dataset.path to a mounted directory";
}

}  // namespace

TensorDataset::TensorDataset(std::string name, std::vector<std::string> class_names, Tensor images, Tensor labels)
    : Dataset(std::move(name), std::move(class_names)), images_(std::move(images)), labels_(std::move(labels)) {
  CONVOY_CHECK(images_.ndim() == 4 && images_.dtype() == DType::u8 && images_.device().is_cpu(),
               "dataset images must be (N, C, H, W) u8 on the CPU");
  CONVOY_CHECK(labels_.ndim() == 1 && labels_.dtype() == DType::i32 && labels_.device().is_cpu(),
               "dataset labels must be (N) i32 on the CPU");
  CONVOY_CHECK(images_.dim(0) == labels_.dim(0), "dataset images and labels differ in count");
}

std::optional<Shape> TensorDataset::stored_shape() const {
  return Shape{images_.dim(1), images_.dim(2), images_.dim(3)};
}

void TensorDataset::load(int64_t index, const Preprocess& p, SampleMode mode, uint64_t seed, uint8_t* out) const {
  const int64_t c = images_.dim(1), h = images_.dim(2), w = images_.dim(3);
  const uint8_t* src = images_.data<uint8_t>() + index * c * h * w;
  const bool crops = p.resize > 0 || (mode == SampleMode::train && p.random_resized_crop);
  if (!crops && p.channels == c && p.height == h && p.width == w) {
    std::memcpy(out, src, static_cast<size_t>(c * h * w));  // the common case: stored as the model wants
    return;
  }
  preprocess_pixels(src, c, h, w, p, mode, seed, out);
}

FileDataset::FileDataset(std::string name, std::vector<std::string> class_names, std::vector<Sample> samples)
    : Dataset(std::move(name), std::move(class_names)), samples_(std::move(samples)) {}

namespace {
// No image a loader should decode is this large; a bigger file is a mistake, not a photo.
constexpr uint64_t kMaxImageBytes = uint64_t{256} << 20;

size_t read_image_file(const std::filesystem::path& path, std::vector<uint8_t>& buffer) {
  InputFile file(path);
  if (file.size() > kMaxImageBytes)
    file.fail("is " + std::to_string(file.size() >> 20) + " MiB, more than an image file may be (256 MiB)");
  if (buffer.size() < file.size()) buffer.resize(file.size());
  file.read_exact(buffer.data(), file.size(), "the image");
  return file.size();
}
}  // namespace

void FileDataset::load(int64_t index, const Preprocess& p, SampleMode mode, uint64_t seed, uint8_t* out) const {
  const Sample& sample = samples_[static_cast<size_t>(index)];
  try {
    // One buffer per worker thread, grown to the largest file: no allocation per image.
    thread_local std::vector<uint8_t> buffer;
    const size_t size = read_image_file(sample.path, buffer);
    decode_preprocess(std::span<const uint8_t>(buffer.data(), size), sample.path.string(), p, mode, seed, out);
  } catch (const BadSampleError&) {
    throw;
  } catch (const InputError& e) {
    throw BadSampleError(e.what());
  }
}

void FileDataset::read_bytes(int64_t index, std::vector<uint8_t>& bytes) const {
  try {
    bytes.resize(read_image_file(samples_[static_cast<size_t>(index)].path, bytes));
  } catch (const BadSampleError&) {
    throw;
  } catch (const InputError& e) {
    throw BadSampleError(e.what());
  }
}

std::unique_ptr<TensorDataset> load_fashion_mnist(const std::filesystem::path& dir, std::string_view split,
                                                  int64_t limit, std::string_view data_volume) {
  return load_mnist_format("fashion-mnist", dir, split, limit, fashion_mnist_classes(),
                           missing_data_hint("; install Debian's dataset-fashion-mnist or set dataset.path",
                                             data_volume));
}

std::unique_ptr<TensorDataset> load_mnist(const std::filesystem::path& dir, std::string_view split,
                                          int64_t limit, std::string_view data_volume) {
  return load_mnist_format("mnist", dir, split, limit, digit_classes(),
                           missing_data_hint("; set dataset.path to the directory holding the MNIST files",
                                             data_volume));
}

std::unique_ptr<Dataset> load_dataset(const DatasetSpec& spec, std::string_view split, int64_t limit) {
  const std::string& kind = spec.kind;
  const std::optional<DatasetKind> known_kind = dataset_kind_from_name(kind);
  if (!known_kind) {
    std::string known;
    for (const std::string& k : dataset_kind_names()) known += (known.empty() ? "" : ", ") + k;
    throw InputError("unknown dataset kind '" + kind + "' (known: " + known + ")");
  }
  // The kinds without a default location need dataset.path.
  auto path = [&] {
    if (spec.path.empty()) throw InputError(kind + ": no default location; set dataset.path");
    return spec.path;
  };
  switch (*known_kind) {
    case DatasetKind::fashion_mnist:
      return load_fashion_mnist(spec.path.empty() ? std::filesystem::path(kFashionMnistDefaultPath) : spec.path,
                                split, limit, spec.data_volume);
    case DatasetKind::synthetic: {
      const int64_t size = spec.synthetic_size > 0 ? spec.synthetic_size : split == "train" ? 50000 : 10000;
      // Different splits draw different images from one seed.
      return make_synthetic(spec.synthetic_shape, spec.synthetic_classes, limit > 0 ? std::min(limit, size) : size,
                            counter_hash(0x5EED, split == "train" ? 0 : 1));
    }
    case DatasetKind::mnist:
      return load_mnist(path(), split, limit, spec.data_volume);
    case DatasetKind::cifar10:
    case DatasetKind::cifar100:
      return load_cifar(kind, path(), split, limit);
    case DatasetKind::image_folder:
      return load_image_folder(path(), split, limit);
    case DatasetKind::csv:
      return load_csv_manifest(path(), split, limit);
  }
  return nullptr;  // unreachable: the switch is exhaustive (-Werror=switch)
}

}  // namespace convoy
