#include "engine/bundle/run_checkpoint.h"

#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "engine/checkpoint/safetensors.h"
#include "engine/config/run_config.h"
#include "engine/core/error.h"
#include "engine/inference/quantize.h"

namespace convoy {

namespace {

// The metadata keys. Checkpoints already written use these names: renaming one breaks them.
constexpr const char* kFormat = "format";
constexpr const char* kModelYaml = "model_yaml";
constexpr const char* kConfigYaml = "config_yaml";
constexpr const char* kClassNames = "class_names";
constexpr const char* kInputShape = "input_shape";
constexpr const char* kMean = "mean";
constexpr const char* kStd = "std";
constexpr const char* kPreprocess = "preprocess";
constexpr const char* kEpoch = "epoch";
constexpr const char* kBatchInEpoch = "batch_in_epoch";
constexpr const char* kStep = "step";
constexpr const char* kSeed = "seed";
constexpr const char* kGlobalBatch = "global_batch";
constexpr const char* kEpochSoFar = "epoch_so_far";
constexpr const char* kOptimizer = "optimizer";
constexpr const char* kPrecision = "precision";
constexpr const char* kTestAccuracy = "test_accuracy";
constexpr const char* kBestAccuracy = "best_accuracy";
constexpr const char* kInt8ActivationMax = "int8_activation_max";
constexpr const char* kQuantization = "quantization";

constexpr const char* kFormatVersion = "convoy-checkpoint-1";

// {"input": [C, H, W], "resize": 256, "random_resized_crop": {"scale": [..], "ratio": [..]} or
// null, "horizontal_flip": true, "crop_padding": 0}: torchvision's transforms, as data.
nlohmann::json preprocess_json(const RunCheckpointInfo& info) {
  const Preprocess& p = *info.preprocess;
  nlohmann::json rrc = nullptr;
  if (p.random_resized_crop)
    rrc = {{"scale", {p.scale_min, p.scale_max}}, {"ratio", {p.ratio_min, p.ratio_max}}};
  return {{"input", {p.channels, p.height, p.width}}, {"resize", p.resize}, {"random_resized_crop", rrc},
          {"horizontal_flip", info.horizontal_flip}, {"crop_padding", info.crop_padding}};
}

std::map<std::string, std::string> metadata_of(const RunCheckpointInfo& info) {
  std::map<std::string, std::string> metadata = {
      {kFormat, kFormatVersion},
      {kModelYaml, info.model_yaml},
      {kConfigYaml, info.config_yaml},
      {kClassNames, nlohmann::json(info.class_names).dump()},
      {kInputShape, nlohmann::json(info.input_shape).dump()},
      {kMean, nlohmann::json(info.mean).dump()},
      {kStd, nlohmann::json(info.std).dump()},
      {kEpoch, std::to_string(info.epoch)},
      {kBatchInEpoch, std::to_string(info.batch_in_epoch)},
      {kStep, std::to_string(info.step)},
      {kSeed, std::to_string(info.seed)},
      {kGlobalBatch, std::to_string(info.global_batch)},
      {kOptimizer, info.optimizer},
      {kPrecision, to_string(info.precision)},
      {kTestAccuracy, std::to_string(info.test_accuracy)},
      {kBestAccuracy, std::to_string(info.best_accuracy)},
  };
  if (info.preprocess) metadata[kPreprocess] = preprocess_json(info).dump();
  if (const auto& e = info.epoch_so_far)  // the double's shortest round-trip text: a resume adds to the same sum
    metadata[kEpochSoFar] =
        nlohmann::json{{"loss_sum", e->loss_sum}, {"correct", e->correct}, {"steps", e->steps}, {"images", e->images}}
            .dump();
  if (!info.int8_activation_max.empty()) {
    metadata[kInt8ActivationMax] = nlohmann::json(info.int8_activation_max).dump();
    const RunCheckpointInfo::Quantization& q = info.quantization;
    metadata[kQuantization] = nlohmann::json{{"device", q.device}, {"type", q.type}, {"method", q.method},
                                             {"percentile", q.percentile}, {"images", q.images}}
                                  .dump();
  }
  return metadata;
}

// Typed reads of one file's metadata; every failure names the file and the key.
class MetadataReader {
 public:
  MetadataReader(const std::map<std::string, std::string>& metadata, std::string source)
      : metadata_(metadata), source_(std::move(source)) {}

  const std::string& text(const char* key) const {
    auto it = metadata_.find(key);
    if (it == metadata_.end())
      throw InputError(source_ + ": not a Convoy checkpoint (metadata '" + key + "' is missing)");
    return it->second;
  }
  // A whole decimal integer in lo ... hi ("12abc" and out-of-range values are refused).
  int64_t integer(const char* key, int64_t lo, int64_t hi) const {
    const std::string& value = text(key);
    int64_t n = 0;
    size_t used = 0;
    try {
      n = std::stoll(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != value.size())
      throw InputError(source_ + ": checkpoint metadata '" + key + "' is not an integer: '" + shorten(value) + "'");
    if (n < lo || n > hi)
      throw InputError(source_ + ": checkpoint metadata '" + key + "': " + value + " is out of range (expected " +
                       std::to_string(lo) + " ... " + std::to_string(hi) + ")");
    return n;
  }
  // A finite number in [lo, hi], or `fallback` when the key is absent.
  double number_or(const char* key, double fallback, double lo, double hi) const {
    if (!metadata_.count(key)) return fallback;
    const std::string& value = text(key);
    double x = 0;
    size_t used = 0;
    try {
      x = std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != value.size())
      throw InputError(source_ + ": checkpoint metadata '" + key + "' is not a number: '" + shorten(value) + "'");
    if (!std::isfinite(x) || x < lo || x > hi)
      throw InputError(source_ + ": checkpoint metadata '" + key + "': " + value + " is out of range (expected a " +
                       "finite number in [" + format(lo) + ", " + format(hi) + "])");
    return x;
  }
  template <class T>
  T json(const char* key) const {
    const std::string& value = text(key);
    try {
      return nlohmann::json::parse(value).get<T>();
    } catch (const nlohmann::json::exception&) {
      throw InputError(source_ + ": checkpoint metadata '" + key + "' is malformed");
    }
  }
  bool has(const char* key) const { return metadata_.count(key) != 0; }
  const std::string& source() const { return source_; }

 private:
  static std::string shorten(const std::string& value) {
    return value.size() <= 40 ? value : value.substr(0, 40) + "...";
  }
  static std::string format(double x) {
    std::string s = std::to_string(x);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }
  const std::map<std::string, std::string>& metadata_;
  std::string source_;
};

RunCheckpointInfo::EpochSoFar read_epoch_so_far(const MetadataReader& meta) {
  const auto j = meta.json<nlohmann::json>(kEpochSoFar);
  RunCheckpointInfo::EpochSoFar e;
  try {
    e.loss_sum = j.at("loss_sum").get<double>();
    e.correct = j.at("correct").get<int64_t>();
    e.steps = j.at("steps").get<int64_t>();
    e.images = j.at("images").get<int64_t>();
  } catch (const nlohmann::json::exception& error) {
    throw InputError(meta.source() + ": checkpoint metadata '" + kEpochSoFar + "': " + error.what());
  }
  if (!std::isfinite(e.loss_sum) || e.loss_sum < 0 || e.steps < 0 || e.steps > kMaxCheckpointSteps || e.images < 0 ||
      e.images > kMaxCheckpointSteps || e.correct < 0 || e.correct > e.images)
    throw InputError(meta.source() + ": checkpoint metadata '" + kEpochSoFar +
                     "' is out of range (expected a finite loss_sum >= 0 and 0 <= correct <= images)");
  return e;
}

RunCheckpointInfo::Quantization read_quantization(const MetadataReader& meta) {
  RunCheckpointInfo::Quantization q;
  const auto bad = [&](const std::string& what) {
    return InputError(meta.source() + ": checkpoint metadata '" + kQuantization + "': " + what);
  };
  try {
    const auto j = meta.json<nlohmann::json>(kQuantization);
    q.device = j.at("device").get<std::string>();
    q.type = j.at("type").get<std::string>();
    q.method = j.at("method").get<std::string>();
    q.percentile = j.at("percentile").get<double>();
    q.images = j.value("images", int64_t{0});
  } catch (const nlohmann::json::exception& error) {
    throw bad(error.what());
  }
  if (q.device != "cpu" && q.device != "cuda") throw bad("device '" + q.device + "', expected cpu or cuda");
  if (q.type != "int8" && q.type != "fp8") throw bad("type '" + q.type + "', expected int8 or fp8");
  if (q.method != "max" && q.method != "percentile") throw bad("method '" + q.method + "', expected max or percentile");
  if (!(q.percentile > 0 && q.percentile <= 100)) throw bad("percentile out of (0, 100]");
  if (q.images < 0) throw bad("images is negative");
  return q;
}

void read_resume_fields(const MetadataReader& meta, RunCheckpointInfo& info) {
  if (meta.has(kInt8ActivationMax))
    throw InputError(meta.source() + ": an int8 checkpoint (written by convoy quantize) is for CPU inference only; "
                     "training resumes from the fp32 run's last.safetensors");
  info.epoch = meta.integer(kEpoch, 0, kMaxEpochs);
  info.batch_in_epoch = meta.integer(kBatchInEpoch, 0, kMaxCheckpointSteps);
  info.step = meta.integer(kStep, 0, kMaxCheckpointSteps);
  // Absent (before data-parallel runs) or 0: unknown, taken as the resuming run's.
  if (meta.has(kGlobalBatch)) info.global_batch = meta.integer(kGlobalBatch, 0, kMaxCheckpointSteps);
  // Absent means no evaluation yet.
  info.test_accuracy = meta.number_or(kTestAccuracy, 0, 0, 1);
  info.best_accuracy = meta.number_or(kBestAccuracy, 0, 0, 1);
  if (meta.has(kEpochSoFar)) info.epoch_so_far = read_epoch_so_far(meta);
}

// The preprocessing, and the training augmentation recorded beside it (horizontal_flip and
// crop_padding, absent in the first checkpoints that had the key: off).
Preprocess read_preprocess(const MetadataReader& meta, RunCheckpointInfo& info) {
  const auto j = meta.json<nlohmann::json>(kPreprocess);
  const auto bad = [&](const std::string& what) {
    return InputError(meta.source() + ": checkpoint metadata 'preprocess': " + what);
  };
  Preprocess p;
  try {
    const auto input = j.at("input").get<std::vector<int64_t>>();
    if (input.size() != 3 || (input[0] != 1 && input[0] != 3)) throw bad("'input' must be [1 or 3, height, width]");
    for (int64_t d : input)
      if (d < 1 || d > 8192) throw bad("'input' sizes must be in 1 ... 8192");
    p.channels = input[0];
    p.height = input[1];
    p.width = input[2];
    p.resize = j.at("resize").get<int64_t>();
    if (p.resize < 0 || p.resize > 8192) throw bad("'resize' must be in 0 ... 8192");
    const auto& rrc = j.at("random_resized_crop");
    if (!rrc.is_null()) {
      const auto scale = rrc.at("scale").get<std::vector<double>>();
      const auto ratio = rrc.at("ratio").get<std::vector<double>>();
      if (scale.size() != 2 || ratio.size() != 2) throw bad("'scale' and 'ratio' must be [min, max]");
      if (!(scale[0] > 0 && scale[0] <= scale[1] && scale[1] <= 1))
        throw bad("'scale' must be [min, max] with 0 < min <= max <= 1");
      if (!(ratio[0] > 0 && ratio[0] <= ratio[1] && ratio[1] < 1e3))
        throw bad("'ratio' must be [min, max] with 0 < min <= max < 1000");
      p.random_resized_crop = true;
      p.scale_min = scale[0];
      p.scale_max = scale[1];
      p.ratio_min = ratio[0];
      p.ratio_max = ratio[1];
    }
    info.horizontal_flip = j.value("horizontal_flip", false);
    info.crop_padding = j.value("crop_padding", int64_t{0});
    if (info.crop_padding < 0) throw bad("'crop_padding' must be 0 (off) or positive");
  } catch (const nlohmann::json::exception& e) {
    throw bad(e.what());
  }
  return p;
}

void read_inference_fields(const MetadataReader& meta, RunCheckpointInfo& info) {
  info.class_names = meta.json<std::vector<std::string>>(kClassNames);
  info.mean = meta.json<std::vector<double>>(kMean);
  info.std = meta.json<std::vector<double>>(kStd);
  // A bad file is the user's input, not a broken invariant of make_normalize.
  if (info.mean.size() != info.std.size() || info.mean.empty() || info.mean.size() > 4)
    throw InputError(meta.source() + ": checkpoint metadata 'mean' and 'std' must give one value per channel, "
                     "1 to 4");
  for (double m : info.mean)
    if (!std::isfinite(m) || std::abs(m) > 1e6)
      throw InputError(meta.source() + ": checkpoint metadata 'mean': expected finite values in -1e6 ... 1e6");
  for (double s : info.std)
    if (!std::isfinite(s) || !(s > 0) || s > 1e6)
      throw InputError(meta.source() + ": checkpoint metadata 'std': expected finite values in (0, 1e6]");
  if (meta.has(kPreprocess)) info.preprocess = read_preprocess(meta, info);
}

void check_finite_tensors(const std::vector<NamedTensor>& tensors, const std::string& source) {
  for (const NamedTensor& t : tensors) {
    const DType d = t.tensor.dtype();
    if (d != DType::f32 && d != DType::bf16 && d != DType::f16) continue;
    const std::vector<float> values = t.tensor.to_floats();
    const bool variance = t.name.size() >= 12 && t.name.compare(t.name.size() - 12, 12, ".running_var") == 0;
    for (size_t i = 0; i < values.size(); ++i) {
      const float v = values[i];
      if (!std::isfinite(v))
        throw InputError(source + ": tensor '" + t.name + "' holds " + (std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf") +
                         " at element " + std::to_string(i) +
                         " (a checkpoint must hold finite values: was it saved from a diverged run?)");
      if (variance && v < 0)
        throw InputError(source + ": tensor '" + t.name + "' holds a negative variance (" + std::to_string(v) +
                         ") at element " + std::to_string(i));
    }
  }
}

// A checkpoint never holds a non-finite weight (or optimizer state): it would be saved as the
// last good state of a run that diverged.
void check_finite(const NamedTensor& t, const std::filesystem::path& path) {
  if (t.tensor.dtype() != DType::f32 && t.tensor.dtype() != DType::bf16 && t.tensor.dtype() != DType::f16) return;
  const std::vector<float> values = t.tensor.to_floats();
  for (size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i]))
      throw NumericError(path.string() + ": not writing the checkpoint: tensor '" + t.name + "' holds " +
                         std::to_string(values[i]) + " (element " + std::to_string(i) +
                         "); the training diverged (a learning rate too high, or bad data)");
}

}  // namespace

void save_run_checkpoint(const std::filesystem::path& path, Model& model, std::vector<NamedTensor> optimizer_state,
                         const RunCheckpointInfo& info) {
  std::vector<NamedTensor> tensors = model.state();
  for (NamedTensor& t : optimizer_state) tensors.push_back(std::move(t));
  for (const NamedTensor& t : tensors) check_finite(t, path);
  write_safetensors(path, tensors, metadata_of(info));
}

void save_run_checkpoint(OutputFile& out, Model& model, std::vector<NamedTensor> optimizer_state,
                         const RunCheckpointInfo& info) {
  std::vector<NamedTensor> tensors = model.state();
  for (NamedTensor& t : optimizer_state) tensors.push_back(std::move(t));
  for (const NamedTensor& t : tensors) check_finite(t, out.path());
  write_safetensors(out, tensors, metadata_of(info));
}

void check_checkpoint_fits_model(const RunCheckpointInfo& info, const Model& model, const std::string& source) {
  const int64_t channels = model.input_shape()[0];
  for (const auto& [key, values] : {std::pair{kMean, &info.mean}, std::pair{kStd, &info.std}})
    if (values->size() != 1 && static_cast<int64_t>(values->size()) != channels)
      throw InputError(source + ": checkpoint metadata '" + key + "' has " + std::to_string(values->size()) +
                       " values, the model's input has " + std::to_string(channels) +
                       " channels (expected one per channel, or one for all)");
  if (static_cast<int64_t>(info.class_names.size()) != model.num_classes())
    throw InputError(source + ": checkpoint metadata 'class_names' has " + std::to_string(info.class_names.size()) +
                     " names, the model has " + std::to_string(model.num_classes()) + " outputs");
}

RunCheckpointInfo read_run_checkpoint_metadata(const std::map<std::string, std::string>& metadata,
                                               const std::string& source, CheckpointUse use) {
  const MetadataReader meta(metadata, source);
  RunCheckpointInfo info;
  info.model_yaml = meta.text(kModelYaml);
  switch (use) {
    case CheckpointUse::resume:
      read_resume_fields(meta, info);
      break;
    case CheckpointUse::inference:
      read_inference_fields(meta, info);
      // What it was trained in (int8 once `convoy quantize` made it): a GPU infers in it by default
      // where it can. Absent in older checkpoints: fp32.
      if (meta.has(kPrecision)) {
        const std::string text = meta.text(kPrecision);
        const std::optional<Precision> p = precision_from_string(text);
        if (!p)
          throw InputError(source + ": checkpoint metadata '" + kPrecision + "' is '" + text + "', expected one of " +
                           precision_list(kAllPrecisions));
        info.precision = *p;
      }
      if (meta.has(kInt8ActivationMax)) {
        info.int8_activation_max = meta.json<std::map<std::string, double>>(kInt8ActivationMax);
        // At load: a degenerate range runs without an error, at chance accuracy. Which layers'
        // ranges may be 0 (fused into the next) takes the model: activation_max_by_node checks that.
        for (const auto& [name, range] : info.int8_activation_max)
          check_activation_range(name, range, name == kQuantInputName, source);
        if (meta.has(kQuantization)) info.quantization = read_quantization(meta);
      }
      break;
  }
  return info;
}

RunCheckpoint read_run_checkpoint(const std::filesystem::path& path, CheckpointUse use) {
  SafetensorsFile file = read_safetensors(path);
  check_finite_tensors(file.tensors, path.string());
  return {std::move(file.tensors), read_run_checkpoint_metadata(file.metadata, path.string(), use)};
}

}  // namespace convoy
