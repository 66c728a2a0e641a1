#include "apps/serve/endpoints.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "apps/serve/shared_memory.h"

namespace convoy::serve {

std::vector<std::string> server_extensions() {
  std::vector<std::string> out(std::begin(kServerExtensions), std::end(kServerExtensions));
  if (cuda_shared_memory_unavailable_reason().empty()) out.emplace_back("cuda_shared_memory");
  return out;
}

std::optional<int64_t> parse_count(std::string_view text) {
  if (text.empty() || text.size() > 18 || !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoll(std::string(text));
}

ModelMetadata model_metadata(const ModelRepository& repository, const std::string& model, const ServedVersion& served) {
  ModelMetadata m;
  m.name = model;
  for (int64_t v : repository.ready_versions(model)) m.versions.push_back(std::to_string(v));
  m.input_shape = {-1};
  for (int64_t d : served.input_shape()) m.input_shape.push_back(d);
  m.classes = served.classes();
  return m;
}

bool load_or_unload(ModelRepository& repository, Operation operation, const std::string& model) {
  if (repository.control() != ModelControl::explicit_) return false;
  if (operation == Operation::model_load)
    repository.load(model);
  else
    repository.unload(model);
  return true;
}

bool submit_request(const std::shared_ptr<ServedVersion>& served, MetricsRegistry& metrics, Tensor input,
                    std::vector<std::string> encoded, int64_t timeout_us, std::function<void(InferResult)> done) {
  ModelMetrics& m = metrics.get(served->config().name, served->version());
  InferJob job;
  job.input = std::move(input);
  job.encoded = std::move(encoded);
  job.enqueued = Clock::now();
  job.deadline = deadline_after(job.enqueued, timeout_us);
  job.done = [&m, start = job.enqueued, done = std::move(done)](InferResult result) {
    m.record_completion(result.status == InferResult::Status::ok, ns_of(Clock::now() - start));
    done(std::move(result));
  };
  if (served->submit(std::move(job))) return true;
  m.request_failure++;
  return false;
}

}  // namespace convoy::serve
