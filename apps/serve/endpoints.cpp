#include "apps/serve/endpoints.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "apps/serve/shared_memory.h"
#include "apps/serve/kserve_json.h"

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

void check_repository_parameters(Operation operation, const std::vector<RepositoryParameter>& parameters) {
  for (const RepositoryParameter& p : parameters) {
    if (operation == Operation::model_load)
      throw RequestError(501, "load parameter '" + p.name + "': convoy serve loads a model as its folder has it "
                              "(no config or file overrides)");
    if (p.name == "unload_dependents" && !p.is_bool)
      throw RequestError(400, "unload parameter 'unload_dependents' must be a bool");
  }
}

bool submit_request(const std::shared_ptr<ServedVersion>& served, MetricsRegistry& metrics, Tensor input,
                    std::vector<std::string> encoded, int64_t timeout_us, std::function<void(InferResult)> done,
                    const std::string& request_id) {
  const std::string& model = served->config().name;
  ModelMetrics& m = metrics.get(model, served->version());
  const Clock::time_point request_start = Clock::now();
  std::optional<RequestTracer::Trace> trace = metrics.tracer().sample(model);
  InferJob job;
  job.input = std::move(input);
  job.encoded = std::move(encoded);
  job.enqueued = Clock::now();
  job.deadline = deadline_after(job.enqueued, timeout_us);
  // Only a traced request carries its names along.
  std::optional<std::pair<std::string, std::string>> traced_names;
  if (trace) traced_names.emplace(model, request_id);
  job.done = [&m, start = job.enqueued, done = std::move(done), trace = std::move(trace), request_start,
              traced_names = std::move(traced_names), version = served->version()](InferResult result) {
    m.record_completion(result.status == InferResult::Status::ok, ns_of(Clock::now() - start));
    const std::optional<InferResult::ComputeTimes> compute = result.compute;
    done(std::move(result));
    if (!trace) return;
    std::vector<std::pair<const char*, Clock::time_point>> stamps = {{"REQUEST_START", request_start},
                                                                     {"QUEUE_START", start}};
    if (compute)
      stamps.insert(stamps.end(), {{"COMPUTE_START", compute->start},
                                   {"COMPUTE_INPUT_END", compute->input_end},
                                   {"COMPUTE_OUTPUT_START", compute->output_start},
                                   {"COMPUTE_END", compute->end}});
    stamps.emplace_back("REQUEST_END", Clock::now());
    trace->write(traced_names->first, version, traced_names->second, stamps);
  };
  if (served->submit(std::move(job))) return true;
  m.request_failure++;
  return false;
}

}  // namespace convoy::serve
