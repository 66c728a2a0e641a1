#pragma once
// The model repository in Triton's layout: REPO/<model>/config.yaml and
// REPO/<model>/<version>/model.safetensors. Loads every model and the versions its policy
// names, each on its own: one that fails (a bad checkpoint, over its memory budget) is
// UNAVAILABLE with the reason, and the others serve.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "apps/serve/image_budget.h"
#include "apps/serve/metrics.h"
#include "apps/serve/model_config.h"
#include "apps/serve/served_model.h"
#include "engine/core/engine_options.h"

namespace convoy::serve {

enum class ModelControl { none, poll, explicit_ };

// One line of the repository index (POST /v2/repository/index).
struct IndexEntry {
  std::string name;
  std::string version;  // empty when the model failed before any version (a bad config.yaml)
  std::string state;    // READY, UNAVAILABLE
  std::string reason;
};

class ModelRepository {
 public:
  // Every version served runs with `engine`'s tunables. What loads and unloads is said on `log`,
  // what fails on `error_log` (null: `log` too).
  ModelRepository(std::filesystem::path root, ModelControl control, MetricsRegistry& metrics, std::ostream& log,
                  const EngineOptions& engine, std::ostream* error_log = nullptr);
  ~ModelRepository();

  // Loads every model folder (none, poll) or just `names` (explicit); failures are logged and
  // recorded, never thrown.
  void load_initial(const std::vector<std::string>& names);
  // (Re)loads one model folder: an InputError when there is no such folder or no version of it
  // could be loaded (the reasons are in the index either way).
  void load(const std::string& name);
  // Unloads every version of the model (queued requests still run); an InputError if unknown.
  void unload(const std::string& name);
  // --model-control poll: loads new and changed models, unloads those whose folder is gone.
  void poll();
  // Stops every version, draining their queues.
  void stop_all();

  // The version to run (version 0: the highest ready one), or null with `why` set.
  std::shared_ptr<ServedVersion> find(const std::string& name, int64_t version, std::string& why) const;
  // Whether the repository holds the model (loaded or failed), ready or not.
  bool has_model(const std::string& name) const;
  // The versions of a model that are READY, ascending.
  std::vector<int64_t> ready_versions(const std::string& name) const;
  std::vector<IndexEntry> index() const;
  ModelControl control() const { return control_; }
  // What every request's images are held to, on both protocols; set before serving.
  void set_image_budget(const ImageBudget& budget) { image_budget_ = budget; }
  const ImageBudget& image_budget() const { return image_budget_; }

 private:
  struct VersionEntry {
    std::string state;
    std::string reason;
    std::shared_ptr<ServedVersion> served;
  };
  struct ModelEntry {
    std::string config_error;  // the whole model failed (config.yaml)
    std::map<int64_t, VersionEntry> versions;
    std::string signature;  // what poll() compares to see a change
  };
  std::string signature_of(const std::string& name) const;
  std::vector<std::string> model_folders() const;
  ModelEntry build(const std::string& name);
  void install(const std::string& name, ModelEntry entry);

  std::filesystem::path root_;
  ModelControl control_;
  MetricsRegistry& metrics_;
  std::ostream& log_;
  std::ostream& error_log_;
  const EngineOptions engine_;
  ImageBudget image_budget_;
  std::mutex load_mutex_;  // one load or unload at a time
  mutable std::mutex mutex_;  // guards models_
  std::map<std::string, ModelEntry> models_;
};

}  // namespace convoy::serve
