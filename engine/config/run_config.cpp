#include "engine/config/run_config.h"

#include <filesystem>
#include <sstream>

#include "engine/config/dataset_kinds.h"
#include "engine/config/yaml_map.h"
#include "engine/core/error.h"

namespace convoy {

namespace {

namespace fs = std::filesystem;

// `--set a.b=c`: walks (creating) maps along the dotted key and sets the leaf. The
// value is parsed as YAML so numbers, booleans and lists keep their types.
void apply_override(YAML::Node& root, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError("--set " + assignment + ": expected key=value, e.g. optimizer.lr=0.05");
  const std::string key = assignment.substr(0, eq);
  const YAML::Node value = yaml_load_string(assignment.substr(eq + 1), "--set " + key);
  std::vector<std::string> parts;
  std::stringstream ss(key);
  for (std::string part; std::getline(ss, part, '.');) {
    if (part.empty()) throw InputError("--set " + assignment + ": empty key segment");
    parts.push_back(part);
  }
  // yaml-cpp nodes are handles: walk with copies, assigning into the tree.
  std::vector<YAML::Node> chain{root};
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node next = chain.back()[parts[i]];
    if (next.IsDefined() && !next.IsNull() && !next.IsMap())
      throw InputError("--set " + assignment + ": '" + parts[i] + "' is not a mapping");
    if (!next.IsDefined() || next.IsNull()) {
      chain.back()[parts[i]] = YAML::Node(YAML::NodeType::Map);
      next = chain.back()[parts[i]];
    }
    chain.push_back(next);
  }
  chain.back()[parts.back()] = value;
}

std::string resolve_path(const std::string& base_dir, const std::string& path) {
  if (path.empty() || fs::path(path).is_absolute()) return path;
  return (fs::path(base_dir) / path).lexically_normal().string();
}

void check_positive(const YamlMap& map, std::string_view key, double value) {
  if (!(value > 0)) map.fail(key, "must be greater than 0");
}

// An integer key in lo ... hi; `what` says what the range means when it is not plain.
int64_t get_int_in(const YamlMap& map, std::string_view key, int64_t fallback, int64_t lo, int64_t hi,
                   const std::string& what = "") {
  const int64_t value = map.get_int(key, fallback);
  if (value < lo || value > hi)
    map.fail(key, std::to_string(value) + " is out of range (expected " +
                      (what.empty() ? std::to_string(lo) + " ... " + std::to_string(hi) : what) + ")");
  return value;
}

bool file_exists(const std::string& path) {
  std::error_code ec;  // a path through a file, or an unreadable directory: not there
  return fs::exists(path, ec);
}

}  // namespace

RunConfig parse_run_config(const std::string& yaml_text, const std::string& source,
                           const std::string& base_dir, const std::vector<std::string>& overrides) {
  YAML::Node root = yaml_load_string(yaml_text, source);
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) throw InputError(source + ": expected a mapping of keys to values at the top");
  for (const auto& o : overrides) apply_override(root, o);

  RunConfig c;
  c.source = source;
  YamlMap top(root, source, "");
  c.name = top.get_string("name", c.name);
  if (c.name.empty() || c.name.find('/') != std::string::npos || c.name == "." || c.name == "..")
    top.fail("name", "must be a plain directory name");
  c.model_path = resolve_path(base_dir, top.get_string("model"));
  if (!file_exists(c.model_path)) top.fail("model", "file not found: " + c.model_path);
  std::error_code ec;
  if (!fs::is_regular_file(c.model_path, ec))
    top.fail("model", c.model_path + " is not a regular file (a model YAML was expected)");
  c.num_classes = top.get_int("num_classes", 0);
  if (c.num_classes < 0 || c.num_classes > 1000000) top.fail("num_classes", "must be 0 (the model's) or 1 ... 1000000");
  if (top.has("init_weights")) {  // init_weights: {path: F.safetensors, strict: false}
    const YamlMap init = top.get_map("init_weights");
    c.init_weights = resolve_path(base_dir, init.get_string("path"));
    if (!file_exists(c.init_weights)) init.fail("path", "file not found: " + c.init_weights);
    c.init_weights_strict = init.get_bool("strict", false);
    init.finish();
  }

  const YamlMap data = top.get_map("dataset");
  c.dataset.kind = data.get_choice("kind", c.dataset.kind, dataset_kind_names());
  if (data.has("path")) c.dataset.path = resolve_path(base_dir, data.get_string("path"));
  c.dataset.train_split = data.get_string("train_split", c.dataset.train_split);
  c.dataset.test_split_given = data.has("test_split");
  c.dataset.test_split = data.get_string("test_split", c.dataset.test_split);
  c.dataset.train_limit = data.get_int("train_limit", 0);
  c.dataset.test_limit = data.get_int("test_limit", 0);
  if (c.dataset.train_limit < 0) data.fail("train_limit", "must be 0 (all) or positive");
  if (c.dataset.test_limit < 0) data.fail("test_limit", "must be 0 (all) or positive");
  if (c.dataset.kind == "synthetic") {
    const YamlMap syn = data.get_map("synthetic");
    c.dataset.synthetic_shape = syn.get_ints("shape", 3, c.dataset.synthetic_shape);
    if (c.dataset.synthetic_shape[0] != 1 && c.dataset.synthetic_shape[0] != 3)
      syn.fail("shape", "expected [channels, height, width] with 1 or 3 channels");
    for (int64_t d : c.dataset.synthetic_shape)
      if (d <= 0 || d > 8192) syn.fail("shape", "dimensions must be in 1 ... 8192");
    c.dataset.synthetic_classes = syn.get_int("classes", c.dataset.synthetic_classes);
    if (c.dataset.synthetic_classes < 1 || c.dataset.synthetic_classes > 100000)
      syn.fail("classes", "must be in 1 ... 100000");
    c.dataset.synthetic_size = syn.get_int("size", 0);
    if (c.dataset.synthetic_size < 0 || c.dataset.synthetic_size > (int64_t{1} << 31))
      syn.fail("size", "must be 0 (the default sizes) or a positive count up to 2^31");
    syn.finish();
  }
  c.dataset.workers = data.get_int("workers", 0);
  if (c.dataset.workers < 0 || c.dataset.workers > 256) data.fail("workers", "must be 0 (auto) or 1 ... 256");
  c.dataset.skip_bad_images = data.get_choice("on_bad_image", "fail", {"fail", "skip"}) == "skip";
  c.dataset.decoder = data.get_choice("decoder", "auto", {"auto", "cpu", "nvjpeg"});
  c.dataset.nvjpeg_workers = data.get_int("nvjpeg_workers", 0);
  if (c.dataset.nvjpeg_workers < 0 || c.dataset.nvjpeg_workers > 256)
    data.fail("nvjpeg_workers", "must be 0 (every worker) or 1 ... 256");
  c.dataset.resize = data.get_int("resize", 0);
  if (c.dataset.resize < 0 || c.dataset.resize > 8192) data.fail("resize", "must be 0 (off) or 1 ... 8192");
  const YamlMap norm = data.get_map("normalize");
  c.dataset.mean = norm.get_doubles("mean", c.dataset.mean);
  c.dataset.std = norm.get_doubles("std", c.dataset.std);
  if (c.dataset.mean.size() != c.dataset.std.size() || c.dataset.mean.empty() || c.dataset.mean.size() > 4)
    norm.fail("std", "mean and std need one value per channel (1 to 4 channels)");
  for (double s : c.dataset.std) check_positive(norm, "std", s);
  for (double m : c.dataset.mean)
    if (m < -1e6 || m > 1e6) norm.fail("mean", "values must be in -1e6 ... 1e6 (on the [0, 1] scale)");
  norm.finish();
  const YamlMap aug = data.get_map("augment");
  c.dataset.crop_padding = get_int_in(aug, "crop_padding", 0, 0, 1024, "0 (off) ... 1024");
  c.dataset.horizontal_flip = aug.get_bool("horizontal_flip", false);
  if (aug.has("random_resized_crop")) {
    const YamlMap rrc = aug.get_map("random_resized_crop");
    c.dataset.random_resized_crop = true;
    const auto scale = rrc.get_doubles("scale", {c.dataset.scale_min, c.dataset.scale_max});
    const auto ratio = rrc.get_doubles("ratio", {c.dataset.ratio_min, c.dataset.ratio_max});
    if (scale.size() != 2 || !(scale[0] > 0 && scale[0] <= scale[1] && scale[1] <= 1))
      rrc.fail("scale", "expected [min, max] with 0 < min <= max <= 1");
    if (ratio.size() != 2 || !(ratio[0] > 0 && ratio[0] <= ratio[1] && ratio[1] < 1e3))
      rrc.fail("ratio", "expected [min, max] with 0 < min <= max");
    c.dataset.scale_min = scale[0];
    c.dataset.scale_max = scale[1];
    c.dataset.ratio_min = ratio[0];
    c.dataset.ratio_max = ratio[1];
    rrc.finish();
  }
  aug.finish();
  data.finish();

  c.batch_size = top.get_int("batch_size", c.batch_size);
  check_positive(top, "batch_size", static_cast<double>(c.batch_size));
  c.batch_size = get_int_in(top, "batch_size", c.batch_size, 1, kMaxBatchSize);
  c.epochs = top.get_int("epochs", c.epochs);
  check_positive(top, "epochs", static_cast<double>(c.epochs));
  c.epochs = get_int_in(top, "epochs", c.epochs, 1, kMaxEpochs);

  const YamlMap opt = top.get_map("optimizer");
  c.optimizer.type = opt.get_choice("type", c.optimizer.type, {"sgd", "adamw"});
  c.optimizer.lr = opt.get_double("lr", c.optimizer.type == "sgd" ? 0.1 : 1e-3);
  check_positive(opt, "lr", c.optimizer.lr);
  c.optimizer.weight_decay = opt.get_double("weight_decay", c.optimizer.type == "sgd" ? 0.0 : 0.01);
  if (c.optimizer.weight_decay < 0) opt.fail("weight_decay", "must not be negative");
  if (c.optimizer.type == "sgd") {
    c.optimizer.momentum = opt.get_double("momentum", 0.9);
    if (c.optimizer.momentum < 0 || c.optimizer.momentum >= 1) opt.fail("momentum", "must be in [0, 1)");
    c.optimizer.nesterov = opt.get_bool("nesterov", false);
    if (c.optimizer.nesterov && c.optimizer.momentum == 0) opt.fail("nesterov", "needs momentum > 0");
  } else {
    c.optimizer.beta1 = opt.get_double("beta1", 0.9);
    c.optimizer.beta2 = opt.get_double("beta2", 0.999);
    c.optimizer.eps = opt.get_double("eps", 1e-8);
    if (c.optimizer.beta1 < 0 || c.optimizer.beta1 >= 1) opt.fail("beta1", "must be in [0, 1)");
    if (c.optimizer.beta2 < 0 || c.optimizer.beta2 >= 1) opt.fail("beta2", "must be in [0, 1)");
    check_positive(opt, "eps", c.optimizer.eps);
  }
  opt.finish();

  const YamlMap sched = top.get_map("schedule");
  c.schedule.type = sched.get_choice("type", "constant", {"constant", "step", "cosine", "onecycle"});
  c.schedule.warmup_epochs = sched.get_double("warmup_epochs", 0.0);
  c.schedule.warmup_start_factor = sched.get_double("warmup_start_factor", 0.1);
  if (c.schedule.warmup_epochs < 0 || c.schedule.warmup_epochs > static_cast<double>(kMaxEpochs))
    sched.fail("warmup_epochs", "must be in 0 ... " + std::to_string(kMaxEpochs));
  if (c.schedule.warmup_start_factor < 0 || c.schedule.warmup_start_factor > 1)
    sched.fail("warmup_start_factor", "must be in [0, 1]");
  if (c.schedule.type == "step") {
    for (double m : sched.get_doubles("milestones", {})) {
      if (m < 0 || m > static_cast<double>(kMaxEpochs))
        sched.fail("milestones", "epochs must be in 0 ... " + std::to_string(kMaxEpochs));
      c.schedule.milestones.push_back(static_cast<int64_t>(m));
    }
    if (c.schedule.milestones.empty()) sched.fail("milestones", "a step schedule needs milestones (epochs)");
    c.schedule.gamma = sched.get_double("gamma", 0.1);
    check_positive(sched, "gamma", c.schedule.gamma);
  } else if (c.schedule.type == "cosine") {
    c.schedule.min_lr = sched.get_double("min_lr", 0.0);
    if (c.schedule.min_lr < 0) sched.fail("min_lr", "must not be negative");
  } else if (c.schedule.type == "onecycle") {
    c.schedule.pct_start = sched.get_double("pct_start", 0.3);
    c.schedule.div_factor = sched.get_double("div_factor", 25.0);
    c.schedule.final_div_factor = sched.get_double("final_div_factor", 1e4);
    if (c.schedule.pct_start <= 0 || c.schedule.pct_start >= 1) sched.fail("pct_start", "must be in (0, 1)");
    check_positive(sched, "div_factor", c.schedule.div_factor);
    check_positive(sched, "final_div_factor", c.schedule.final_div_factor);
    if (c.schedule.warmup_epochs > 0) sched.fail("warmup_epochs", "onecycle has its own warm-up");
  }
  sched.finish();

  c.label_smoothing = top.get_double("label_smoothing", 0.0);
  if (c.label_smoothing < 0 || c.label_smoothing >= 1) top.fail("label_smoothing", "must be in [0, 1)");
  c.nan_skip_step = top.get_choice("nan_policy", "stop", {"stop", "skip_step"}) == "skip_step";
  const int64_t seed = top.get_int("seed", 42);
  if (seed < 0) top.fail("seed", "must not be negative");
  c.seed = static_cast<uint64_t>(seed);
  c.device = top.get_string("device", "auto");
  const bool cuda_n = c.device.rfind("cuda:", 0) == 0 && c.device.size() > 5 && c.device.size() <= 8 &&
                      c.device.find_first_not_of("0123456789", 5) == std::string::npos;
  if (c.device != "auto" && c.device != "cpu" && c.device != "cuda" && !cuda_n)
    top.fail("device", "'" + c.device + "' is not one of: auto, cpu, cuda, cuda:N");
  c.precision = *precision_from_string(
      top.get_choice("precision", to_string(Precision::fp32), precision_names(kTrainingPrecisions)));
  c.layout = top.get_choice("layout", "auto", {"auto", "nchw", "nhwc"});
  c.deterministic = top.get_bool("deterministic", false);
  c.cudnn_benchmark = top.get_bool("cudnn_benchmark", true);
  c.threads = get_int_in(top, "threads", 0, 0, kMaxThreads, "0 (all cores) or 1 ... " + std::to_string(kMaxThreads));

  const YamlMap dist = top.get_map("distributed");
  c.distributed_timeout_seconds = dist.get_double("timeout_seconds", 300);
  if (!(c.distributed_timeout_seconds >= 1 && c.distributed_timeout_seconds <= 86400))
    dist.fail("timeout_seconds", "must be in 1 ... 86400");
  c.bucket_mb = get_int_in(dist, "bucket_mb", 25, 1, 4096);
  dist.finish();
  c.sync_batchnorm = top.get_bool("sync_batchnorm", false);

  const YamlMap out = top.get_map("output");
  c.output_dir = out.get_string("dir", c.output_dir);
  c.log_every = out.get_int("log_every", c.log_every);
  check_positive(out, "log_every", static_cast<double>(c.log_every));
  c.log_every = get_int_in(out, "log_every", c.log_every, 1, int64_t{1} << 40);
  c.tensorboard = out.get_bool("tensorboard", c.tensorboard);
  out.finish();
  top.finish();

  YAML::Emitter emitter;
  emitter << root;
  c.resolved_yaml = emitter.c_str();
  return c;
}

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  const std::string text = read_yaml_text(path, "the config file");
  const std::string base = fs::path(path).parent_path().string();
  return parse_run_config(text, path, base.empty() ? "." : base, overrides);
}

}  // namespace convoy
