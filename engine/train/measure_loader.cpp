// `convoy train --data-only`: the training data path alone, in images per second.
#include <iomanip>
#include <ostream>

#include "engine/core/error.h"
#include "engine/train/progress.h"
#include "engine/train/run_setup.h"
#include "engine/train/trainer.h"

namespace convoy {

double measure_loader(const RunConfig& config, const EngineOptions& engine, int64_t batches, std::ostream& log) {
  const std::unique_ptr<Backend> backend = open_backend(config, engine, log);
  const std::unique_ptr<Dataset> data =
      load_split(config, engine, config.dataset.train_split, config.dataset.train_limit);
  // The input shape only, read from the YAML: building the model would initialize all its
  // weights (a quarter of a second for ResNet-50) for nothing. num_classes changes only the
  // classifier, never the input.
  const Preprocess preprocess =
      preprocess_of(config, Model::input_shape_of(Model::read_file(config.model_path), config.model_path));
  const std::unique_ptr<BatchUploader> uploader = backend->make_batch_uploader();
  LoaderOptions options = train_loader_options(config, *data, preprocess);
  options.host_empty = [&](Shape shape, DType dtype) { return uploader->host_empty(std::move(shape), dtype); };
  options.batch_decoder = training_batch_decoder(config, engine, *data, *backend, log);
  options.batch_decoder_slots = config.dataset.nvjpeg_workers;
  DataLoader loader(*data, options);
  const int64_t per_epoch = loader.batches_per_epoch();
  if (per_epoch == 0)
    throw InputError(config.source + ": batch_size " + std::to_string(config.batch_size) + " is larger than the " +
                     std::to_string(data->size()) + " training images");
  const int64_t total = batches > 0 ? batches : per_epoch;
  log << "loading " << total << " batches of " << config.batch_size << " from " << data->name() << " ("
      << data->size() << " images) with " << options.workers << " workers into " << shape_str({preprocess.channels,
      preprocess.height, preprocess.width}) << " on " << backend->device().str() << std::endl;
  const auto start = std::chrono::steady_clock::now();
  int64_t images = 0, skipped = 0;
  for (int64_t epoch = 0, done = 0; done < total; ++epoch) {
    loader.start_epoch(epoch);
    Batch batch;
    while (done < total && loader.next(batch)) {
      uploader->upload(batch.images);
      uploader->upload(batch.labels);
      images += batch.labels.dim(0);
      ++done;
    }
    skipped += loader.stats().skipped;
  }
  backend->synchronize();
  const double seconds = seconds_since(start);
  const double rate = static_cast<double>(images) / seconds;
  log << std::fixed << std::setprecision(0) << "loader: " << images << " images in " << std::setprecision(2)
      << seconds << " s, " << std::setprecision(0) << rate << " img/s" << (skipped ? ", skipped " : "")
      << (skipped ? std::to_string(skipped) : "") << std::defaultfloat << std::endl;
  if (options.batch_decoder) {
    const BatchDecoder::Counts counts = options.batch_decoder->counts();
    log << "decoder: " << counts.device << " of " << images << " images decoded on the GPU, " << counts.cpu
        << " by nvJPEG's CPU fallback" << std::endl;
  }
  return rate;
}

}  // namespace convoy
