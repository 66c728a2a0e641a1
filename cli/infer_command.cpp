// convoy infer --model runs/x/best.safetensors IMAGE...  |  --data fashion-mnist:test
#include <algorithm>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <numeric>

#include "cli/commands.h"
#include "datasets/dataset.h"
#include "datasets/image_decode.h"
#include "engine/backends/backend.h"
#include "engine/core/error.h"
#include "engine/graph/model.h"
#include "engine/train/evaluate.h"
#include "engine/train/run_checkpoint.h"

namespace convoy::cli {

namespace {

struct InferArgs {
  std::string model;
  std::vector<std::string> images;
  std::string data;       // "fashion-mnist:test"
  std::string data_path;  // overrides the dataset's default location
  std::string predictions;  // write the top-1 class of each --data sample here
  std::string device = "auto";
  int64_t top_k = 3;
  int64_t batch_size = 256;
  bool invert = false;
};

// A trained model with what inference needs from its checkpoint's metadata.
struct LoadedModel {
  Model model;
  std::vector<std::string> class_names;
  NormalizeAugment normalize;
};

LoadedModel load_model(const std::string& path, Backend& backend) {
  RunCheckpoint ckpt = read_run_checkpoint(path, CheckpointUse::inference);
  LoadedModel loaded{Model::from_yaml(ckpt.info.model_yaml, path + " (model_yaml)", 0),
                     std::move(ckpt.info.class_names), make_normalize(ckpt.info.mean, ckpt.info.std)};
  loaded.model.load_state(ckpt.tensors, path);
  loaded.model.to(backend, DType::f32);
  if (static_cast<int64_t>(loaded.class_names.size()) != loaded.model.num_classes())
    throw InputError(path + ": " + std::to_string(loaded.class_names.size()) +
                     " class names for a model with " + std::to_string(loaded.model.num_classes()) + " outputs");
  return loaded;
}

void print_confusion(const EvalResult& r, const std::vector<std::string>& names) {
  const size_t k = names.size();
  std::cout << "confusion matrix (rows: true class, columns: predicted)\n" << std::setw(14) << "";
  for (size_t c = 0; c < k; ++c) std::cout << std::setw(6) << c;
  std::cout << "\n";
  for (size_t t = 0; t < k; ++t) {
    std::cout << std::setw(2) << t << " " << std::left << std::setw(11) << names[t].substr(0, 11) << std::right;
    for (size_t c = 0; c < k; ++c) std::cout << std::setw(6) << r.confusion[t * k + c];
    std::cout << "\n";
  }
}

int run_infer(const InferArgs& args) {
  if (args.images.empty() && args.data.empty())
    throw InputError("infer: give image files or --data KIND:SPLIT (e.g. --data fashion-mnist:test)");
  BackendOptions options;
  std::unique_ptr<Backend> backend = select_backend(args.device, options, std::cerr);
  LoadedModel loaded = load_model(args.model, *backend);
  const Shape& in = loaded.model.input_shape();  // (C, H, W)

  if (!args.data.empty()) {
    const size_t colon = args.data.find(':');
    if (colon == std::string::npos)
      throw InputError("--data " + args.data + ": expected KIND:SPLIT, e.g. fashion-mnist:test");
    const Dataset data = load_dataset(args.data.substr(0, colon), args.data_path, args.data.substr(colon + 1), 0);
    const EvalResult r = evaluate(loaded.model, *backend, data, args.batch_size, loaded.normalize);
    std::cout << std::fixed << std::setprecision(2) << data.name << ": " << r.samples << " images, accuracy "
              << r.accuracy * 100 << "%, loss " << std::setprecision(4) << r.loss << " on "
              << backend->device().str() << "\n";
    print_confusion(r, loaded.class_names);
    if (!args.predictions.empty()) {
      std::ofstream out(args.predictions);
      for (int32_t p : r.predictions) out << p << "\n";
      if (!out) throw InputError(args.predictions + ": cannot write the predictions");
    }
  }

  for (const std::string& image : args.images) {
    Tensor pixels = decode_image(image, in[0], in[1], in[2]);  // (C, H, W)
    if (args.invert)
      for (int64_t i = 0; i < pixels.numel(); ++i) pixels.data<uint8_t>()[i] = 255 - pixels.data<uint8_t>()[i];
    const std::vector<float> probs = predict_probabilities(
        loaded.model, *backend, pixels.reshape({1, in[0], in[1], in[2]}), loaded.normalize);
    std::vector<int> order(probs.size());
    std::iota(order.begin(), order.end(), 0);
    const size_t k = static_cast<size_t>(std::clamp<int64_t>(args.top_k, 1, static_cast<int64_t>(probs.size())));
    std::partial_sort(order.begin(), order.begin() + static_cast<long>(k), order.end(),
                      [&](int a, int b) { return probs[a] > probs[b]; });
    std::cout << image << ":";
    for (size_t i = 0; i < k; ++i)
      std::cout << (i ? "," : "") << " " << loaded.class_names[order[i]] << " " << std::fixed
                << std::setprecision(3) << probs[order[i]];
    std::cout << "\n";
  }
  return 0;
}

}  // namespace

void add_infer_command(CLI::App& app, Action& chosen) {
  auto args = std::make_shared<InferArgs>();
  CLI::App* cmd = app.add_subcommand("infer", "Classify images, or measure accuracy on a dataset split");
  cmd->add_option("--model,-m", args->model, "a checkpoint written by convoy train (.safetensors)")->required();
  cmd->add_option("images", args->images, "PNG/JPEG/... files to classify");
  cmd->add_option("--data", args->data, "evaluate on KIND:SPLIT, e.g. fashion-mnist:test");
  cmd->add_option("--data-path", args->data_path, "directory of the dataset files (default: the Debian package's)");
  cmd->add_option("--predictions", args->predictions, "with --data: write each sample's top-1 class, one per line");
  cmd->add_option("--device", args->device, "auto, cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--top-k,-k", args->top_k, "classes to print per image")->capture_default_str();
  cmd->add_option("--batch-size", args->batch_size, "batch size for --data")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_flag("--invert", args->invert, "invert the image (dark object on a light background, as in photos)");
  cmd->callback([args, &chosen] { chosen = [args] { return run_infer(*args); }; });
}

}  // namespace convoy::cli
