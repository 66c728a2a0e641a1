#include "engine/bundle/loaded_model.h"

#include "engine/bundle/run_checkpoint.h"
#include "engine/core/error.h"

namespace convoy {

LoadedModel load_model(const std::string& path, Backend& backend, bool fusion) {
  RunCheckpoint ckpt = read_run_checkpoint(path, CheckpointUse::inference);
  Model model = Model::from_yaml(ckpt.info.model_yaml, path + " (model_yaml)", 0);
  check_checkpoint_fits_model(ckpt.info, model, path);
  LoadedModel loaded{std::move(model), std::move(ckpt.info.class_names), make_normalize(ckpt.info.mean, ckpt.info.std)};
  loaded.model.load_state(ckpt.tensors, path);
  loaded.int8_activation_max = std::move(ckpt.info.int8_activation_max);
  loaded.trained_precision = ckpt.info.precision;
  if (!loaded.int8_activation_max.empty()) {
    loaded.quantized_for = ckpt.info.quantization.device;
    loaded.quantized_type = ckpt.info.quantization.type;
  }
  const Shape& in = loaded.model.input_shape();  // (C, H, W)
  if (ckpt.info.preprocess) {
    loaded.preprocess = *ckpt.info.preprocess;
    if (loaded.preprocess.channels != in[0] || loaded.preprocess.height != in[1] || loaded.preprocess.width != in[2])
      throw InputError(path + ": checkpoint metadata 'preprocess' makes " +
                       shape_str({loaded.preprocess.channels, loaded.preprocess.height, loaded.preprocess.width}) +
                       " images for a model whose input is " + shape_str(in));
  } else {  // older checkpoints: the whole image, resized to the input
    loaded.preprocess.channels = in[0];
    loaded.preprocess.height = in[1];
    loaded.preprocess.width = in[2];
  }
  loaded.model.set_fusion(fusion);
  loaded.model.to(backend, DType::f32);
  if (static_cast<int64_t>(loaded.class_names.size()) != loaded.model.num_classes())
    throw InputError(path + ": " + std::to_string(loaded.class_names.size()) +
                     " class names for a model with " + std::to_string(loaded.model.num_classes()) + " outputs");
  return loaded;
}

}  // namespace convoy
