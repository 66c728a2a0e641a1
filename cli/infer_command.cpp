// convoy infer --model runs/x/best.safetensors IMAGE|FOLDER...  |  --data fashion-mnist:test
#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "cli/infer_output.h"
#include "datasets/dataset.h"
#include "datasets/loader.h"
#include "datasets/nvjpeg.h"
#include "engine/backends/backend.h"
#include "engine/bundle/inference_precision.h"
#include "engine/bundle/loaded_model.h"
#include "engine/bundle/predict.h"
#include "engine/core/error.h"
#include "engine/core/file_io.h"
#include "engine/core/precision.h"
#include "engine/graph/model.h"
#include "engine/inference/eight_bit_graph.h"
#include "engine/inference/graphed_batches.h"
#include "engine/bundle/evaluate.h"

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
  int64_t workers = 4;  // decoding threads
  int threads = 0;      // CPU threads for the model; 0 = all cores (one for a tiny pass)
  bool no_plan = false;  // run the layers one by one (the training graph's forward)
  std::string precision = "auto";  // CPU plan: kPlanPrecisions; auto = int8 for an int8 checkpoint, else fp32
  bool invert = false;
  std::string output = "text";  // infer_output_names()
  std::string output_file;      // empty: stdout
  bool logits = false;
};

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

// The image files named on the command line, folders listed recursively in sorted order.
std::vector<FileDataset::Sample> image_files(const std::vector<std::string>& args) {
  namespace fs = std::filesystem;
  std::vector<FileDataset::Sample> files;
  for (const std::string& arg : args) {
    std::error_code ec;
    if (!fs::is_directory(arg, ec)) {
      files.push_back({arg, 0});  // a missing or bad file fails when it is read, with its name
      continue;
    }
    std::vector<fs::path> found;
    for (auto it = fs::recursive_directory_iterator(arg, fs::directory_options::follow_directory_symlink, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
      if (it->is_regular_file() && is_image_file_name(it->path().filename().string())) found.push_back(it->path());
    if (ec) throw InputError(arg + ": cannot list the folder: " + ec.message());
    if (found.empty()) throw InputError(arg + ": no .jpg, .jpeg or .png images in this folder");
    std::sort(found.begin(), found.end());
    for (auto& f : found) files.push_back({std::move(f), 0});
  }
  return files;
}

// CPU inference plans (engine/inference) unless --no-plan.
std::unique_ptr<InferencePlans> make_plans(const InferArgs& args, const InferenceOptions& precision) {
  if (args.no_plan) return nullptr;
  InferenceOptions o = precision;
  o.threads = args.threads;
  o.flops_per_thread = kFlopsPerThread;
  return std::make_unique<InferencePlans>(o);
}

// The largest batch the GPU records a forward for: --batch-size, or fewer where there are fewer
// images. Each recorded size builds and times its own plans (ResNet-50 on the H200: about 1 s a
// size): one image records one size, not nine.
int64_t recorded_batch(const InferArgs& args, int64_t images) { return std::clamp<int64_t>(images, 1, args.batch_size); }

// One line on stderr: how much of an 8-bit plan runs in 8 bits.
void report_eight_bit(const GraphedBatches& graphed, const LoadedModel& loaded) {
  if (const CompiledForward* plan = graphed.eight_bit_plan())
    std::cerr << "8-bit plan: " << plan->eight_bit_convolutions() << " convolutions in 8 bits of "
              << loaded.eight_bit->steps.size() << " steps\n";
}

void evaluate_split(const InferArgs& args, LoadedModel& loaded, Backend& backend, const EngineOptions& engine) {
  const size_t colon = args.data.find(':');
  if (colon == std::string::npos)
    throw InputError("--data " + args.data + ": expected KIND:SPLIT, e.g. fashion-mnist:test");
  DatasetSpec spec;
  spec.kind = args.data.substr(0, colon);
  spec.path = args.data_path;
  spec.data_volume = engine.data_volume;
  const std::unique_ptr<Dataset> data = load_dataset(spec, args.data.substr(colon + 1), 0);
  if (data->class_names().size() != loaded.class_names.size())
    throw InputError(data->name() + " has " + std::to_string(data->class_names().size()) + " classes, the model " +
                     std::to_string(loaded.class_names.size()));
  LoaderOptions options = eval_loader_options(loaded.preprocess, args.batch_size, args.workers);
  EvalResult r;
  if (backend.device().is_cuda()) {  // the GPU's inference path, as classify_images and `convoy serve` run it
    GraphedBatches graphed(backend, loaded.model, recorded_batch(args, data->size()), loaded.normalize,
                           loaded.eight_bit.get());
    report_eight_bit(graphed, loaded);
    options.host_empty = [&graphed](Shape shape, DType dtype) { return graphed.host_empty(std::move(shape), dtype); };
    DataLoader loader(*data, options);
    r = evaluate(graphed, loaded.model.num_classes(), loader);
  } else {
    DataLoader loader(*data, options);
    const auto plans = make_plans(args, loaded.plan_precision);
    r = evaluate(loaded.model, backend, loader, loaded.normalize, plans.get());
  }
  std::cout << std::fixed << std::setprecision(2) << data->name() << ": " << r.samples << " images, accuracy "
            << r.accuracy * 100 << "%, loss " << std::setprecision(4) << r.loss << " on " << backend.device().str()
            << "\n";
  print_confusion(r, loaded.class_names);
  if (!args.predictions.empty()) {
    std::string text;
    for (int32_t p : r.predictions) text += std::to_string(p) + "\n";
    write_file_atomically(args.predictions, "the predictions", text);
  }
}

// Top-k classes of every image, preprocessed as the model was evaluated in training, in batches.
void classify_images(const InferArgs& args, LoadedModel& loaded, Backend& backend, const EngineOptions& engine) {
  const FileDataset files("images", loaded.class_names, image_files(args.images));
  LoaderOptions options = eval_loader_options(loaded.preprocess, args.batch_size, args.workers);
  // On a GPU, recorded forwards for every batch size up to --batch-size, as `convoy serve` runs
  // them, fed from pinned memory; the files are decoded there too (nvJPEG, the training loader's
  // decoder), batch by batch.
  std::unique_ptr<GraphedBatches> graphed;
  if (backend.device().is_cuda()) {
    graphed = std::make_unique<GraphedBatches>(backend, loaded.model, recorded_batch(args, files.size()),
                                               loaded.normalize, loaded.eight_bit.get());
    report_eight_bit(*graphed, loaded);
    options.host_empty = [g = graphed.get()](Shape shape, DType dtype) { return g->host_empty(std::move(shape), dtype); };
    if (!args.invert && nvjpeg_unavailable_reason().empty())
      options.batch_decoder = make_nvjpeg_batch_decoder(backend.device().index, engine.nvjpeg_hardware);
  }
  DataLoader loader(files, options);
  loader.start_epoch(0);
  const auto plans = make_plans(args, loaded.plan_precision);
  const auto classes = static_cast<int64_t>(loaded.class_names.size());
  InferOutputOptions output;
  output.format = infer_output_from_name(args.output);
  output.path = args.output_file;
  output.logits = args.logits;
  output.top_k = args.top_k;
  PredictionWriter writer(output, loaded.class_names);
  int64_t next_file = 0;
  auto print = [&](const std::vector<float>& probs, const std::vector<float>& logits, int64_t rows) {
    for (int64_t b = 0; b < rows; ++b, ++next_file)
      writer.add(files.samples()[static_cast<size_t>(next_file)].path.string(), probs.data() + b * classes,
                 args.logits ? logits.data() + b * classes : nullptr);
  };
  std::optional<GraphedBatches::Pending> running;  // on a GPU: the last batch, printed once the next one is queued
  std::vector<float> probs, logits;
  Batch batch;
  while (loader.next(batch)) {
    Tensor& pixels = batch.images;  // (B, C, H, W) u8
    if (args.invert)
      for (int64_t i = 0; i < pixels.numel(); ++i) pixels.data<uint8_t>()[i] = 255 - pixels.data<uint8_t>()[i];
    if (!graphed) {
      const Predictions p = predict(loaded.model, backend, pixels, loaded.normalize, plans.get());
      print(p.probabilities, p.logits, pixels.dim(0));
      continue;
    }
    GraphedBatches::Pending next = graphed->submit(pixels);
    if (running) {
      graphed->finish(*running, logits, probs);
      print(probs, logits, running->rows());
    }
    running = std::move(next);
  }
  if (running) {
    graphed->finish(*running, logits, probs);
    print(probs, logits, running->rows());
  }
  writer.finish();
}

// The plan's precision (engine/bundle/inference_precision.h), refusals in the flags' terms.
InferenceOptions choose_precision(const InferArgs& args, LoadedModel& loaded, const Backend& backend) {
  PrecisionRequest request;
  if (args.precision != "auto") request.asked = parse_precision(args.precision, kInferencePrecisions, "--precision");
  request.trained = loaded.trained_precision;
  request.quantized_for = loaded.quantized_for;
  request.quantized_type = loaded.quantized_type;
  request.words.subject = args.model;
  request.words.use_cpu = "use --device cpu";
  request.words.fp32_on_gpu = ", or --precision fp32 to run this int8 checkpoint's fp32 weights on the GPU";
  request.words.not_int8 = "not an int8 checkpoint (no calibrated ranges); make one with convoy quantize --model " +
                           args.model + " --calibration fashion-mnist:train -o model-int8.safetensors";
  if (args.no_plan) request.words.plan_off = "--no-plan";
  return choose_inference_precision(request, loaded.model, loaded.int8_activation_max, backend.device(), args.model);
}

// --precision's values: auto, then the plans' precisions.
std::vector<std::string> precision_choices() {
  std::vector<std::string> names = precision_names(kInferencePrecisions);
  names.insert(names.begin(), "auto");
  return names;
}

int run_infer(const InferArgs& args, const EngineOptions& engine) {
  if (args.images.empty() && args.data.empty())
    throw InputError("infer: give image files or folders, or --data KIND:SPLIT (e.g. --data fashion-mnist:test)");
  if (!args.predictions.empty()) check_output_target(args.predictions, "the predictions");
  const bool for_scripts = args.output != "text" || args.logits || !args.output_file.empty();
  if (for_scripts && args.images.empty())
    throw InputError("--output, --output-file and --logits are for image files; with --data, --predictions writes "
                     "each sample's top-1 class");
  // The accuracy report is printed on stdout: it would break a JSON or CSV document there.
  if (!args.data.empty() && args.output != "text" && args.output_file.empty())
    throw InputError("--output " + args.output + " with --data: the accuracy report goes to stdout too; write the "
                     "predictions to a file with --output-file");
  if (args.logits && args.output == "text")
    throw InputError("--logits: the text output shows the top-k only; use --output json, jsonl or csv");
  if (!args.output_file.empty()) check_output_target(args.output_file, "the predictions");
  BackendOptions options;
  options.threads = args.threads;
  options.cuda = engine.cuda;
  // No run-time compiled cuDNN engines unless CONVOY_CUDNN_COMPILED asks: they save ~7 us an image
  // (ResNet-50 bf16 at batch 256, 25.8k -> 32k img/s on the H200) and cost ~1 - 2 s of compiling
  // per recorded batch size, which a command that ends with its images does not earn back (and
  // its JPEGs decode at ~9.6k img/s, below either rate). Servers and the bench keep them.
  if (!options.cuda.cudnn_compiled) options.cuda.cudnn_compiled = 0;
  std::unique_ptr<Backend> backend = select_backend(args.device, options, std::cerr);
  LoadedModel loaded = load_model(args.model, *backend, engine.fusion);
  loaded.plan_precision = choose_precision(args, loaded, *backend);
  loaded.plan_precision.winograd = engine.winograd;
  loaded.plan_precision.layout = engine.plan_layout;
  loaded.plan_precision.adaptive_team = engine.adaptive_team;
  if (backend->device().is_cuda()) {
    // A GPU computes in the precision's own dtype and layout (the CPU's bf16 and int8 are its plans').
    if (loaded.plan_precision.precision == Precision::tf32) {  // TF32 is the backend's math: one made with it
      options.tf32 = true;
      backend = select_backend(args.device, options, std::cerr);
      loaded = load_model(args.model, *backend, engine.fusion);
      loaded.plan_precision = choose_precision(args, loaded, *backend);
    }
    const Precision precision = loaded.plan_precision.precision;
    // The 8-bit plan's bf16 steps (the stem, the classifier) read the model's input in bf16.
    const DType dtype = precision == Precision::bf16 || is_eight_bit(precision) ? DType::bf16 : DType::f32;
    loaded.model.to(*backend, dtype, backend->preferred_layout(dtype));
    if (is_eight_bit(precision))
      loaded.eight_bit = std::make_shared<const EightBitGraph>(
          eight_bit_graph(loaded.model, loaded.plan_precision.activation_max, eight_bit_type(precision)));
    std::cerr << "inference on " << backend->device().str() << " in " << to_string(loaded.plan_precision.precision)
              << "\n";
  }
  if (!args.data.empty()) evaluate_split(args, loaded, *backend, engine);
  if (!args.images.empty()) classify_images(args, loaded, *backend, engine);
  return 0;
}

}  // namespace

void add_infer_command(CLI::App& app, Action& chosen) {
  auto args = std::make_shared<InferArgs>();
  CLI::App* cmd = app.add_subcommand("infer", "Classify images, or measure accuracy on a dataset split");
  cmd->add_option("--model,-m", args->model, "a checkpoint written by convoy train or convoy import (.safetensors)")
      ->required();
  cmd->add_option("images", args->images, "JPEG/PNG files or folders of them to classify");
  cmd->add_option("--data", args->data, "evaluate on KIND:SPLIT, e.g. fashion-mnist:test");
  cmd->add_option("--data-path", args->data_path, "directory of the dataset files (default: the Debian package's)");
  cmd->add_option("--predictions", args->predictions, "with --data: write each sample's top-1 class, one per line");
  cmd->add_option("--device", args->device, "auto, cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--top-k,-k", args->top_k, "classes to print per image (1 or more; more than the classes prints them all)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--batch-size", args->batch_size, "images per forward pass")->capture_default_str()->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--workers", args->workers, "image decoding threads")->capture_default_str()->check(CLI::Range(1, 256));
  cmd->add_option("--threads", args->threads, "CPU threads (0 = all cores; a tiny pass takes one)")
      ->capture_default_str()->check(CLI::Range(0, 1024));
  cmd->add_option("--precision", args->precision,
                  "fp32 (exact), tf32 (GPU tensor cores), bf16 (GPU; CPUs with AVX-512 BF16/AMX), int8 (a convoy "
                  "quantize checkpoint, CPU or GPU), fp8 (the same, GPUs of compute capability 8.9+); auto = on a GPU "
                  "the checkpoint's 8-bit type where it was quantized for one (--device cuda), else its training "
                  "precision; on the CPU int8 for an int8 checkpoint, else fp32")
      ->capture_default_str()->check(CLI::IsMember(precision_choices()));
  cmd->add_option("--output", args->output,
                  "what is written per image: text (top-k, 3 decimals), or for scripts json (one array), jsonl (an "
                  "object a line) or csv (a header row, a row an image): the file, the top-k labels, class indices "
                  "and probabilities at full float precision")
      ->capture_default_str()->check(CLI::IsMember(infer_output_names()));
  cmd->add_option("--output-file", args->output_file,
                  "write the per-image output to this file (atomically, once all images are done) instead of stdout");
  cmd->add_flag("--logits", args->logits, "with --output json, jsonl or csv: every class's raw logit too");
  cmd->add_flag("--no-plan", args->no_plan, "CPU: run the layers one by one instead of the compiled inference plan");
  cmd->add_flag("--invert", args->invert, "invert the image (dark object on a light background, as in photos)");
  cmd->callback([args, &chosen] { chosen = [args](const EngineOptions& engine) { return run_infer(*args, engine); }; });
}

}  // namespace convoy::cli
