#include "apps/serve/routes.h"

#include <algorithm>
#include <numeric>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/serve/endpoints.h"
#include "apps/serve/image_budget.h"
#include "apps/serve/kserve_json.h"
#include "apps/serve/triton_config.h"
#include "apps/serve/triton_stats.h"
#include "datasets/preprocess.h"
#include "engine/core/error.h"

namespace convoy::serve {

using json = nlohmann::json;

namespace {

HttpReply json_reply(unsigned status, const json& doc) {
  HttpReply r;
  r.status = status;
  r.body = doc.dump();
  return r;
}

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> parts;
  size_t start = 1;
  while (start <= path.size()) {
    const size_t end = std::min(path.find('/', start), path.size());
    if (end > start) parts.emplace_back(path.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// ?key=value from the query string; `fallback` when absent.
std::string query_value(const std::string& query, const std::string& key, const std::string& fallback) {
  size_t pos = 0;
  while (pos < query.size()) {
    const size_t end = std::min(query.find('&', pos), query.size());
    const std::string pair = query.substr(pos, end - pos);
    if (pair.rfind(key + "=", 0) == 0) return pair.substr(key.size() + 1);
    pos = end + 1;
  }
  return fallback;
}

// A request body that is a JSON object, or empty (an empty object); else RequestError(400).
json body_object(const std::string& body) {
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) return json::object();
  json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded()) throw RequestError(400, "malformed JSON in the request body");
  if (!doc.is_object()) throw RequestError(400, "the request body must be a JSON object, got " + std::string(doc.type_name()));
  return doc;
}

// A load's or unload's body: empty, or {"parameters": {...}} as check_repository_parameters takes them.
void check_repository_body(Operation operation, const std::string& body) {
  const json doc = body_object(body);
  const auto parameters = doc.find("parameters");
  if (parameters == doc.end()) return;
  if (!parameters->is_object()) throw RequestError(400, "'parameters' must be an object");
  std::vector<RepositoryParameter> checked;
  for (const auto& [name, value] : parameters->items()) checked.push_back({name, value.is_boolean()});
  check_repository_parameters(operation, checked);
}

// A version or count in a request: a positive integer, else 0.
int64_t parse_positive(const std::string& text) { return parse_count(text).value_or(0); }

// A row of kEndpoints as the Router matches it: its path's segments, "{model}" and "{version}"
// capturing. A path with "[/versions/{version}]" gives two routes, with and without it.
struct Route {
  const Endpoint* endpoint;
  std::vector<std::string> segments;
};

const std::vector<Route>& routes() {
  static const std::vector<Route> all = [] {
    std::vector<Route> r;
    for (const Endpoint& e : kEndpoints) {
      if (e.method.empty()) continue;  // gRPC only
      const std::string path(e.path);
      const size_t open = path.find('['), close = path.find(']');
      if (open == std::string::npos) {
        r.push_back({&e, split_path(path)});
        continue;
      }
      const std::string before = path.substr(0, open), after = path.substr(close + 1);
      r.push_back({&e, split_path(before + after)});
      r.push_back({&e, split_path(before + path.substr(open + 1, close - open - 1) + after)});
    }
    return r;
  }();
  return all;
}

// Whether `route` matches the path's segments `p`, with what it captures.
bool match_route(const Route& route, const std::vector<std::string>& p, RouteMatch& m) {
  if (p.size() != route.segments.size()) return false;
  RouteMatch found;
  for (size_t i = 0; i < p.size(); ++i) {
    const std::string& s = route.segments[i];
    if (s == "{model}")
      found.model = p[i];
    else if (s == "{region}")
      found.region = p[i];
    else if (s == "{version}")
      found.version = parse_positive(p[i]);
    else if (s != p[i])
      return false;
  }
  m = std::move(found);
  return true;
}

unsigned status_of(InferResult::Status s) {
  switch (s) {
    case InferResult::Status::ok:
      return 200;
    case InferResult::Status::invalid:
      return 400;
    case InferResult::Status::unavailable:
      return 503;
    case InferResult::Status::timeout:
      return 504;
    case InferResult::Status::failed:
      return 500;
  }
  return 500;
}

// The operations whose work is more than a lookup: run by the worker pool, never an I/O thread.
bool heavy(Operation operation) {
  return operation == Operation::model_infer || operation == Operation::model_classify ||
         operation == Operation::model_load || operation == Operation::model_unload;
}

// Queues a request on `served` through submit_request; `make` turns a success into its reply, on a
// worker (the JSON of a big reply is no work for a model's instance thread).
void run_job(const std::shared_ptr<ServedVersion>& served, MetricsRegistry& metrics, WorkerPool* workers,
             Tensor input, std::vector<std::string> encoded, int64_t timeout_us,
             std::function<HttpReply(InferResult&)> make, ReplyFn reply, const std::string& request_id = {}) {
  const std::string model = served->config().name;
  auto done = [model, make = std::move(make), reply, workers](InferResult result) {
    auto finish = [model, make, reply, result = std::move(result)]() mutable {
      answer_errors(reply, [&] {
        HttpReply r = result.status == InferResult::Status::ok ? make(result)
                                                               : error_reply(status_of(result.status), result.error);
        r.model = model;
        reply(std::move(r));
      });
    };
    if (workers)
      workers->post(std::move(finish));
    else
      finish();
  };
  const bool queued = submit_request(served, metrics, std::move(input), std::move(encoded), timeout_us, std::move(done),
                                     request_id);
  if (!queued) {
    HttpReply r = error_reply(503, "model '" + model + "' version " + std::to_string(served->version()) +
                                       ": the queue is full (max_queue_size " +
                                       std::to_string(served->config().max_queue_size) + "); try again later");
    r.model = model;
    reply(std::move(r));
  }
}

}  // namespace

HttpReply error_reply(unsigned status, const std::string& message) { return json_reply(status, {{"error", message}}); }

HttpReply workers_busy_reply(const WorkerPool& workers) {
  return error_reply(503, "the server's request workers are busy (" + std::to_string(workers.max_queued()) +
                              " requests waiting, --worker-queue-size); try again later");
}

void answer_errors(const ReplyFn& reply, const std::function<void()>& work) {
  try {
    work();
  } catch (const RequestError& e) {
    reply(error_reply(e.status(), e.what()));
  } catch (const Error& e) {
    reply(error_reply(400, e.what()));
  } catch (const std::bad_alloc&) {
    reply(error_reply(503, "out of memory"));
  } catch (const std::exception& e) {
    reply(error_reply(500, std::string("internal error: ") + e.what()));
  }
}

void Router::handle_metrics(const HttpRequest& request, ReplyFn reply) {
  if (request.target != "/metrics" || request.method != "GET")
    return reply(error_reply(404, "the metrics port serves GET /metrics only"));
  HttpReply r;
  r.content_type = "text/plain; version=0.0.4";
  r.body = metrics_.prometheus_text();
  reply(std::move(r));
}

void Router::handle(HttpRequest request, ReplyFn reply) {
  const size_t q = request.target.find('?');
  const std::string path = request.target.substr(0, q);
  const std::string query = q == std::string::npos ? "" : request.target.substr(q + 1);
  const std::vector<std::string> p = split_path(path);
  if (p.empty() || p[0] != "v2") return reply(error_reply(404, "not found: " + path));
  // A version in the path is checked before the endpoint is looked up: a bad one is a 400
  // whatever follows it.
  if (p.size() >= 5 && p[1] == "models" && p[3] == "versions" && parse_positive(p[4]) == 0)
    return reply(error_reply(400, "bad version '" + p[4] + "'"));
  RouteMatch m;
  const Route* found = nullptr;
  for (const Route& route : routes())
    if (route.endpoint->method == request.method && match_route(route, p, m)) {
      found = &route;
      break;
    }
  if (!found) {
    for (const Route& route : routes())
      if (match_route(route, p, m))
        return reply(error_reply(405, "method " + request.method + " is not allowed on " + path));
    return reply(error_reply(404, "no endpoint " + request.method + " " + path));
  }
  const Operation operation = found->endpoint->operation;
  if (!heavy(operation) || !workers_ || WorkerPool::on_worker())
    return answer_errors(reply, [&] { serve(operation, m, request, query, reply); });
  if (operation == Operation::model_classify && repository_.has_model(m.model)) {
    // An image over budget is refused before it waits for a worker: its header is enough.
    try {
      admit_image_cost(image_cost(request.body), 1, repository_.image_budget(), metrics_.server());
    } catch (const RequestError& e) {
      return reply(error_reply(e.status(), e.what()));
    }
  }
  auto work = [this, operation, m, request = std::move(request), query, reply]() mutable {
    answer_errors(reply, [&] { serve(operation, m, request, query, reply); });
  };
  if (!workers_->try_submit(std::move(work))) reply(workers_busy_reply(*workers_));
}

void Router::serve(Operation operation, const RouteMatch& m, HttpRequest& request, const std::string& query,
                   const ReplyFn& reply) {
  switch (operation) {
    case Operation::server_metadata: {
      json extensions = json::array();
      for (const std::string& e : server_extensions()) extensions.push_back(e);
      return reply(json_reply(200, {{"name", kServerName}, {"version", CONVOY_VERSION}, {"extensions", extensions}}));
    }
    case Operation::server_live:
      return reply(json_reply(200, json::object()));
    case Operation::server_ready:
      return reply(ready_ ? json_reply(200, json::object()) : error_reply(503, "not ready"));
    case Operation::repository_index: {  // {"ready": true}: the ready models only, as gRPC's
      const json body = body_object(request.body);
      const auto ready = body.find("ready");
      if (ready != body.end() && !ready->is_boolean()) throw RequestError(400, "'ready' must be a bool");
      const bool only_ready = ready != body.end() && ready->get<bool>();
      json index = json::array();
      for (const IndexEntry& e : repository_.index()) {
        if (only_ready && e.state != "READY") continue;
        json item = {{"name", e.name}, {"state", e.state}, {"reason", e.reason}};
        if (!e.version.empty()) item["version"] = e.version;
        index.push_back(std::move(item));
      }
      return reply(json_reply(200, index));
    }
    case Operation::model_load:
    case Operation::model_unload:
      check_repository_body(operation, request.body);
      if (!load_or_unload(repository_, operation, m.model)) return reply(error_reply(400, kExplicitControlOnly));
      return reply(json_reply(200, json::object()));
    case Operation::model_metadata:
      return reply(metadata_reply(m.model, m.version));
    case Operation::model_config:
      return reply(config_reply(m.model, m.version));
    case Operation::model_ready: {
      // A model not in the repository is a 404 (as for metadata); a version not ready a 400.
      std::string why;
      if (repository_.find(m.model, m.version, why)) return reply(json_reply(200, json::object()));
      return reply(error_reply(repository_.has_model(m.model) ? 400 : 404, why));
    }
    case Operation::model_infer:
      return infer(m.model, m.version, request, reply);
    case Operation::model_classify: {
      const std::string k = query_value(query, "top_k", "5");
      const int64_t top_k = parse_positive(k);
      if (top_k == 0) return reply(error_reply(400, "top_k must be a positive integer, got '" + k + "'"));
      return classify(m.model, m.version, request, top_k, reply);
    }
    case Operation::model_statistics: {  // an empty model (GET /v2/models/stats): every model
      HttpReply r;
      r.body = model_statistics_json(repository_, metrics_, m.model, m.version);
      return reply(std::move(r));
    }
    case Operation::system_shm_status:
    case Operation::system_shm_register:
    case Operation::system_shm_unregister:
    case Operation::cuda_shm_status:
    case Operation::cuda_shm_register:
    case Operation::cuda_shm_unregister:
      return reply(shared_memory_reply(*shm_, operation, m.region, request.body));
    case Operation::trace_setting:  // a GET reads the settings, a POST changes them first
    case Operation::log_settings: {
      const std::string* update = request.method == "POST" ? &request.body : nullptr;
      HttpReply r;
      r.body = operation == Operation::trace_setting
                   ? trace_setting_json(metrics_.tracer(), repository_, m.model, update)
                   : log_settings_json(metrics_.log(), update);
      return reply(std::move(r));
    }
  }
}

HttpReply Router::metadata_reply(const std::string& model, int64_t version) {
  std::string why;
  const std::shared_ptr<ServedVersion> served = repository_.find(model, version, why);
  if (!served) return error_reply(404, why);
  const ModelMetadata meta = model_metadata(repository_, model, *served);
  return json_reply(200, {{"name", meta.name},
                          {"versions", meta.versions},
                          {"platform", "convoy"},
                          {"inputs", {{{"name", kInputName}, {"datatype", "FP32"}, {"shape", meta.input_shape}}}},
                          {"outputs",
                           {{{"name", kLogitsName}, {"datatype", "FP32"}, {"shape", {-1, meta.classes}}},
                            {{"name", kProbabilitiesName}, {"datatype", "FP32"}, {"shape", {-1, meta.classes}}}}}});
}

HttpReply Router::config_reply(const std::string& model, int64_t version) {
  std::string why;
  const std::shared_ptr<ServedVersion> served = repository_.find(model, version, why);
  if (!served) return error_reply(404, why);
  HttpReply r;
  r.body = triton_model_config_json(*served);
  return r;
}

void Router::infer(const std::string& model, int64_t version, const HttpRequest& request, const ReplyFn& reply) {
  std::string why;
  std::shared_ptr<ServedVersion> served = repository_.find(model, version, why);
  if (!served) return reply(error_reply(404, why));
  const TensorSpec spec{served->input_shape(), served->config().max_batch_size, served->classes(),
                        request_memory_budget_};
  auto parsed = std::make_shared<InferRequest>(
      parse_infer_request(request.body, request.inference_header_length, spec, shm_.get()));
  admit_images(*served, parsed->encoded, parsed->input, repository_.image_budget(), metrics_);
  const int64_t classes = served->classes(), v = served->version();
  Tensor input = parsed->input;
  run_job(served, metrics_, workers_, std::move(input), std::move(parsed->encoded), parsed->timeout_us,
          [parsed, model, v, classes, names = served->class_names()](InferResult& r) {
            InferReplyBody body = make_infer_reply(*parsed, model, v, r.logits, r.probabilities, classes, names);
            HttpReply out;
            out.body = std::move(body.body);
            out.inference_header_length = body.header_length;
            if (out.inference_header_length) out.content_type = "application/octet-stream";
            return out;
          },
          reply, parsed->id);
}

void Router::classify(const std::string& model, int64_t version, HttpRequest& request, int64_t top_k,
                      const ReplyFn& reply) {
  std::string why;
  std::shared_ptr<ServedVersion> served = repository_.find(model, version, why);
  if (!served) return reply(error_reply(404, why));
  if (request.body.empty()) return reply(error_reply(400, "classify: the body must be a JPEG or PNG image"));
  // Decoded here on the CPU, by the model's instance on a GPU (nvJPEG); an unreadable image is a
  // 400 from either.
  std::vector<std::string> encoded{std::move(request.body)};
  Tensor input;
  admit_images(*served, encoded, input, repository_.image_budget(), metrics_);
  const std::vector<std::string> names = served->class_names();
  const int64_t v = served->version();
  run_job(served, metrics_, workers_, std::move(input), std::move(encoded), 0,
          [names, model, v, top_k](InferResult& r) {
            std::vector<int> order(r.probabilities.size());
            std::iota(order.begin(), order.end(), 0);
            const size_t k = std::min(order.size(), static_cast<size_t>(top_k));
            std::partial_sort(order.begin(), order.begin() + static_cast<long>(k), order.end(),
                              [&](int a, int b) { return r.probabilities[a] > r.probabilities[b]; });
            json top = json::array();
            for (size_t i = 0; i < k; ++i)
              top.push_back({{"label", names[order[i]]}, {"index", order[i]}, {"probability", r.probabilities[order[i]]}});
            return json_reply(200, {{"model_name", model}, {"model_version", std::to_string(v)}, {"top_k", top}});
          },
          reply);
}

}  // namespace convoy::serve
