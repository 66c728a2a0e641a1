#include "apps/serve/repository.h"

#include <algorithm>
#include <system_error>

#include "engine/core/error.h"

namespace convoy::serve {

namespace fs = std::filesystem;

namespace {

// Model names go into URLs and Prometheus labels as they are.
bool valid_model_name(const std::string& name) {
  if (name.empty() || name.size() > 128 || name[0] == '.') return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'; });
}

// The numbered version folders of a model, ascending.
std::vector<int64_t> version_folders(const fs::path& dir) {
  std::vector<int64_t> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (!it->is_directory() || n.empty() || n.size() > 18 || !std::all_of(n.begin(), n.end(), ::isdigit)) continue;
    const int64_t v = std::stoll(n);
    if (v > 0) out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string mtime_of(const fs::path& p) {
  std::error_code ec;
  const auto t = fs::last_write_time(p, ec);
  const auto size = fs::file_size(p, ec);
  return ec ? "-" : std::to_string(t.time_since_epoch().count()) + "/" + std::to_string(size);
}

}  // namespace

ModelRepository::ModelRepository(fs::path root, ModelControl control, MetricsRegistry& metrics, std::ostream& log,
                                 const EngineOptions& engine, std::ostream* error_log)
    : root_(std::move(root)), control_(control), metrics_(metrics), log_(log), error_log_(error_log ? *error_log : log),
      engine_(engine) {
  std::error_code ec;
  if (!fs::is_directory(root_, ec)) throw InputError(root_.string() + ": the model repository is not a folder");
}

ModelRepository::~ModelRepository() { stop_all(); }

std::vector<std::string> ModelRepository::model_folders() const {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator(root_, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (it->is_directory() && valid_model_name(it->path().filename().string()))
      out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string ModelRepository::signature_of(const std::string& name) const {
  const fs::path dir = root_ / name;
  std::string s = mtime_of(dir / "config.yaml");
  for (int64_t v : version_folders(dir)) {
    const std::string version = std::to_string(v);
    s.append(";").append(version).append(":").append(mtime_of(dir / version / "model.safetensors"));
  }
  return s;
}

ModelRepository::ModelEntry ModelRepository::build(const std::string& name) {
  ModelEntry entry;
  const fs::path dir = root_ / name;
  entry.signature = signature_of(name);
  ModelConfig config;
  try {
    config = read_model_config((dir / "config.yaml").string(), name);
  } catch (const Error& e) {
    entry.config_error = e.what();
    error_log_ << "convoy serve: model '" << name << "' UNAVAILABLE: " << e.what() << std::endl;
    return entry;
  }
  const std::vector<int64_t> versions = select_versions(config.version_policy, version_folders(dir));
  if (versions.empty()) {
    entry.config_error = "no version folder " + dir.string() + "/<N>/ that the version policy selects";
    error_log_ << "convoy serve: model '" << name << "' UNAVAILABLE: " << entry.config_error << std::endl;
    return entry;
  }
  uint64_t used = 0;
  // Newest first: when the budget holds only some versions, the newest ones serve.
  for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
    const int64_t v = *it;
    VersionEntry& ve = entry.versions[v];
    const fs::path file = dir / std::to_string(v) / "model.safetensors";
    try {
      const uint64_t left = config.max_memory == 0 ? 0 : (config.max_memory > used ? config.max_memory - used : 1);
      ve.served = std::make_shared<ServedVersion>(config, v, file.string(), left, metrics_, engine_);
      used += ve.served->memory().total;
      ve.state = "READY";
      log_ << "convoy serve: model '" << name << "' version " << v << " READY on " << ve.served->device() << " ("
           << config.instance_count << " instance(s), max batch " << config.max_batch_size << ", "
           << ve.served->execution() << ")" << std::endl;
    } catch (const Error& e) {
      ve.state = "UNAVAILABLE";
      ve.reason = e.what();
      error_log_ << "convoy serve: model '" << name << "' version " << v << " UNAVAILABLE: " << e.what() << std::endl;
    }
  }
  return entry;
}

void ModelRepository::install(const std::string& name, ModelEntry entry) {
  ModelEntry old;
  {
    std::lock_guard lock(mutex_);
    auto it = models_.find(name);
    if (it != models_.end()) old = std::move(it->second);
    models_[name] = std::move(entry);
  }
  // Outside the lock: stopping drains the old versions' queues, which may take a while.
  for (auto& [v, ve] : old.versions)
    if (ve.served) ve.served->stop();
}

void ModelRepository::load_initial(const std::vector<std::string>& names) {
  std::lock_guard load_lock(load_mutex_);
  const std::vector<std::string> all = model_folders();
  for (const std::string& name : control_ == ModelControl::explicit_ ? names : all) {
    if (!valid_model_name(name) || !fs::is_directory(root_ / name)) {
      error_log_ << "convoy serve: --load-model " << name << ": no such model folder in " << root_.string() << std::endl;
      continue;
    }
    install(name, build(name));
  }
}

void ModelRepository::load(const std::string& name) {
  if (!valid_model_name(name) || !fs::is_directory(root_ / name))
    throw InputError("no model folder '" + name + "' in the repository");
  std::lock_guard load_lock(load_mutex_);
  ModelEntry entry = build(name);
  const bool any = std::any_of(entry.versions.begin(), entry.versions.end(),
                               [](const auto& kv) { return kv.second.served != nullptr; });
  std::string reason = entry.config_error;
  for (const auto& [v, ve] : entry.versions)
    if (!ve.reason.empty()) {
      if (!reason.empty()) reason += "; ";
      reason += ve.reason;
    }
  install(name, std::move(entry));
  if (!any) throw InputError("failed to load '" + name + "': " + reason);
}

void ModelRepository::unload(const std::string& name) {
  std::lock_guard load_lock(load_mutex_);
  ModelEntry old;
  {
    std::lock_guard lock(mutex_);
    auto it = models_.find(name);
    if (it == models_.end()) throw InputError("model '" + name + "' is not loaded");
    old = std::move(it->second);
    models_.erase(it);
  }
  for (auto& [v, ve] : old.versions)
    if (ve.served) ve.served->stop();
  log_ << "convoy serve: model '" << name << "' unloaded" << std::endl;
}

void ModelRepository::poll() {
  std::lock_guard load_lock(load_mutex_);
  const std::vector<std::string> folders = model_folders();
  std::vector<std::string> gone;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [name, entry] : models_)
      if (!std::binary_search(folders.begin(), folders.end(), name)) gone.push_back(name);
  }
  for (const std::string& name : gone) {
    ModelEntry old;
    {
      std::lock_guard lock(mutex_);
      old = std::move(models_[name]);
      models_.erase(name);
    }
    for (auto& [v, ve] : old.versions)
      if (ve.served) ve.served->stop();
    log_ << "convoy serve: model '" << name << "' unloaded (its folder is gone)" << std::endl;
  }
  for (const std::string& name : folders) {
    const std::string signature = signature_of(name);
    {
      std::lock_guard lock(mutex_);
      auto it = models_.find(name);
      if (it != models_.end() && it->second.signature == signature) continue;
    }
    install(name, build(name));
  }
}

void ModelRepository::stop_all() {
  std::map<std::string, ModelEntry> all;
  {
    std::lock_guard lock(mutex_);
    all.swap(models_);
  }
  for (auto& [name, entry] : all)
    for (auto& [v, ve] : entry.versions)
      if (ve.served) ve.served->stop();
}

std::shared_ptr<ServedVersion> ModelRepository::find(const std::string& name, int64_t version,
                                                     std::string& why) const {
  std::lock_guard lock(mutex_);
  auto it = models_.find(name);
  if (it == models_.end()) {
    why = "unknown model '" + name + "'";
    return nullptr;
  }
  const auto& versions = it->second.versions;
  if (version == 0) {
    for (auto v = versions.rbegin(); v != versions.rend(); ++v)
      if (v->second.served) return v->second.served;
    std::string reasons = it->second.config_error;
    for (const auto& [v, ve] : versions)
      if (!ve.reason.empty()) {
        if (!reasons.empty()) reasons += "; ";
        reasons += ve.reason;
      }
    why = "model '" + name + "' has no version ready" + (reasons.empty() ? "" : ": " + reasons);
    return nullptr;
  }
  auto v = versions.find(version);
  if (v == versions.end()) {
    why = "unknown version " + std::to_string(version) + " of model '" + name + "'";
    return nullptr;
  }
  if (!v->second.served) why = "model '" + name + "' version " + std::to_string(version) + " is not ready: " + v->second.reason;
  return v->second.served;
}

bool ModelRepository::has_model(const std::string& name) const {
  std::lock_guard lock(mutex_);
  return models_.count(name) != 0;
}

std::vector<int64_t> ModelRepository::ready_versions(const std::string& name) const {
  std::lock_guard lock(mutex_);
  std::vector<int64_t> out;
  auto it = models_.find(name);
  if (it != models_.end())
    for (const auto& [v, ve] : it->second.versions)
      if (ve.served) out.push_back(v);
  return out;
}

std::vector<IndexEntry> ModelRepository::index() const {
  std::vector<IndexEntry> out;
  const std::vector<std::string> folders = model_folders();
  std::lock_guard lock(mutex_);
  for (const std::string& name : folders) {
    auto it = models_.find(name);
    if (it == models_.end()) {
      out.push_back({name, "", "UNAVAILABLE", "unloaded"});
      continue;
    }
    if (!it->second.config_error.empty()) out.push_back({name, "", "UNAVAILABLE", it->second.config_error});
    for (const auto& [v, ve] : it->second.versions) out.push_back({name, std::to_string(v), ve.state, ve.reason});
  }
  return out;
}

}  // namespace convoy::serve
