// CIFAR-10 and CIFAR-100, the official binary version (www.cs.toronto.edu/~kriz/cifar.html):
// fixed-size records of label byte(s) then 3072 pixel bytes, R, G and B planes of 32x32.
#include <algorithm>
#include <cstring>
#include <system_error>

#include "datasets/dataset.h"
#include "engine/core/error.h"
#include "engine/core/file_io.h"

namespace convoy {
namespace {

constexpr int64_t kSide = 32;
constexpr int64_t kPixels = 3 * kSide * kSide;  // one record's image, planar RGB
// Class-name files are a few hundred bytes; a larger one is not a CIFAR name file.
constexpr uint64_t kMaxNamesBytes = 1 << 20;

struct CifarFormat {
  std::string kind;
  std::string subdir;       // what the official archive unpacks to
  int64_t label_bytes = 1;  // cifar100: coarse then fine, the fine one used
  int64_t num_classes = 10;
  std::string names_file;
  std::vector<std::string> default_names;
  std::vector<std::string> train_files, test_files;

  int64_t record_bytes() const { return label_bytes + kPixels; }
};

CifarFormat cifar_format(std::string_view kind) {
  CifarFormat f;
  f.kind = std::string(kind);
  if (kind == "cifar10") {
    f.subdir = "cifar-10-batches-bin";
    f.names_file = "batches.meta.txt";
    f.default_names = {"airplane", "automobile", "bird",  "cat",  "deer",
                       "dog",      "frog",       "horse", "ship", "truck"};
    for (int i = 1; i <= 5; ++i) f.train_files.push_back("data_batch_" + std::to_string(i) + ".bin");
    f.test_files = {"test_batch.bin"};
  } else if (kind == "cifar100") {
    f.subdir = "cifar-100-binary";
    f.label_bytes = 2;
    f.num_classes = 100;
    f.names_file = "fine_label_names.txt";
    for (int i = 0; i < 100; ++i) f.default_names.push_back(std::to_string(i));
    f.train_files = {"train.bin"};
    f.test_files = {"test.bin"};
  } else {
    throw InputError("unknown CIFAR kind '" + std::string(kind) + "' (expected cifar10 or cifar100)");
  }
  return f;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// `dir` itself when it holds any of the split's files, else the archive's folder inside it
// when that exists, else `dir` (whose missing files the caller reports).
std::filesystem::path resolve_dir(const std::filesystem::path& dir, const CifarFormat& f,
                                  const std::vector<std::string>& files) {
  std::error_code ec;
  for (const auto& name : files)
    if (std::filesystem::exists(dir / name, ec)) return dir;
  if (std::filesystem::is_directory(dir / f.subdir, ec)) return dir / f.subdir;
  return dir;
}

// One name a line, blank lines (the official file ends with some) and trailing '\r' ignored.
std::vector<std::string> read_class_names(const std::filesystem::path& dir, const CifarFormat& f) {
  const std::filesystem::path path = dir / f.names_file;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return f.default_names;
  InputFile file(path);
  if (file.size() > kMaxNamesBytes) file.fail("is too large for a class-name file (over 1 MiB)");
  std::string text(file.size(), '\0');
  file.read_exact(text.data(), text.size(), "the class names");
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.pop_back();
    if (!line.empty()) names.push_back(std::move(line));
    start = end + 1;
  }
  if (static_cast<int64_t>(names.size()) != f.num_classes)
    file.fail("has " + std::to_string(names.size()) + " class names, expected " +
              std::to_string(f.num_classes) + " (one a line)");
  return names;
}

}  // namespace

std::unique_ptr<TensorDataset> load_cifar(std::string_view kind, const std::filesystem::path& dir,
                                          std::string_view split, int64_t limit) {
  const CifarFormat f = cifar_format(kind);
  if (split != "train" && split != "test" && split != "val")
    throw InputError(f.kind + ": unknown split '" + std::string(split) +
                     "' (expected train or test; val reads the test split)");
  if (limit < 0)
    throw InputError(f.kind + ": limit must be >= 0 (0 = all samples), got " + std::to_string(limit));
  const auto& files = split == "train" ? f.train_files : f.test_files;
  const std::filesystem::path base = resolve_dir(dir, f, files);

  std::error_code ec;
  if (!std::filesystem::is_directory(base, ec))
    throw InputError(file_message(base, "no such directory; " + f.kind + " expects " + join(files) +
                                            " there or in its " + f.subdir + "/ folder"));
  std::vector<std::string> missing;
  for (const auto& name : files)
    if (!std::filesystem::exists(base / name, ec)) missing.push_back(name);
  if (!missing.empty())
    throw InputError(file_message(base / missing.front(),
                                  "no such file; " + f.kind + "'s " + std::string(split) + " split needs " +
                                      join(files) + " (missing: " + join(missing) + ")"));

  // Every file's size is checked before any is read, so a truncated last batch fails at once.
  const int64_t record = f.record_bytes();
  std::vector<int64_t> counts;
  int64_t total = 0;
  for (const auto& name : files) {
    InputFile file(base / name);
    if (file.size() % static_cast<uint64_t>(record) != 0)
      file.fail("truncated: " + std::to_string(file.size()) + " bytes is not a whole number of " +
                std::to_string(record) + "-byte records");
    counts.push_back(static_cast<int64_t>(file.size()) / record);
    total += counts.back();
  }
  if (total == 0)
    throw InputError(
        file_message(base / files.front(), "the " + std::string(split) + " split has no records"));
  const int64_t n = limit == 0 ? total : std::min(limit, total);
  std::vector<std::string> names = read_class_names(base, f);

  Tensor images = Tensor::empty({n, 3, kSide, kSide}, DType::u8);  // (N, 3, 32, 32) u8
  Tensor labels = Tensor::empty({n}, DType::i32);                  // (N) i32
  uint8_t* pixels = images.data<uint8_t>();
  int32_t* label_out = labels.data<int32_t>();
  // Read in chunks: CIFAR-100's train.bin is 150 MB, no need to hold it twice.
  constexpr int64_t kChunkRecords = 1024;
  std::vector<uint8_t> buffer;
  int64_t done = 0;
  for (size_t fi = 0; fi < files.size() && done < n; ++fi) {
    InputFile file(base / files[fi]);
    const int64_t take = std::min(counts[fi], n - done);
    for (int64_t first = 0; first < take; first += kChunkRecords) {
      const int64_t chunk = std::min(kChunkRecords, take - first);
      buffer.resize(static_cast<size_t>(chunk * record));
      file.read_exact(buffer.data(), buffer.size(), "records");
      for (int64_t r = 0; r < chunk; ++r) {
        const uint8_t* rec = buffer.data() + r * record;
        const int64_t label = rec[f.label_bytes - 1];  // cifar100: the fine label, after the coarse one
        if (label >= f.num_classes)
          file.fail("label " + std::to_string(label) + " of record " + std::to_string(first + r) +
                    " is out of range (expected 0 to " + std::to_string(f.num_classes - 1) + ")");
        label_out[done] = static_cast<int32_t>(label);
        std::memcpy(pixels + done * kPixels, rec + f.label_bytes, kPixels);
        ++done;
      }
    }
  }
  return std::make_unique<TensorDataset>(f.kind + ":" + std::string(split), std::move(names),
                                         std::move(images), std::move(labels));
}

}  // namespace convoy
