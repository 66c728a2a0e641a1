#include "apps/serve/routes.h"

#include <algorithm>
#include <numeric>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/serve/kserve_json.h"
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

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 1;
  while (start <= path.size()) {
    const size_t end = std::min(path.find('/', start), path.size());
    if (end > start) parts.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// A version in a URL: a positive integer, else 0 (which no route accepts).
int64_t parse_version(const std::string& text) {
  if (text.empty() || text.size() > 18 || !std::all_of(text.begin(), text.end(), ::isdigit)) return 0;
  return std::stoll(text);
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

Clock::time_point deadline_after(int64_t timeout_us, Clock::time_point start) {
  return timeout_us > 0 ? start + std::chrono::microseconds(timeout_us) : Clock::time_point::max();
}

// Queues a job on `served`, counting a success or failure for the request when it completes.
void run_job(const std::shared_ptr<ServedVersion>& served, MetricsRegistry& metrics, Tensor input,
             std::vector<std::string> encoded, int64_t timeout_us, std::function<HttpReply(InferResult&)> make,
             ReplyFn reply) {
  ModelMetrics& m = metrics.get(served->config().name, served->version());
  InferJob job;
  job.input = std::move(input);
  job.encoded = std::move(encoded);
  job.enqueued = Clock::now();
  job.deadline = deadline_after(timeout_us, job.enqueued);
  const std::string model = served->config().name;
  job.done = [&m, model, start = job.enqueued, make = std::move(make), reply](InferResult result) {
    HttpReply r;
    if (result.status == InferResult::Status::ok) {
      r = make(result);
      m.request_success++;
      m.request_duration_us +=
          static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count());
    } else {
      r = error_reply(status_of(result.status), result.error);
    }
    r.model = model;
    reply(std::move(r));
  };
  if (!served->submit(std::move(job))) {
    m.request_failure++;
    HttpReply r = error_reply(503, "model '" + model + "' version " + std::to_string(served->version()) +
                                       ": the queue is full (max_queue_size " +
                                       std::to_string(served->config().max_queue_size) + "); try again later");
    r.model = model;
    reply(std::move(r));
  }
}

}  // namespace

HttpReply error_reply(unsigned status, const std::string& message) { return json_reply(status, {{"error", message}}); }

void Router::handle_metrics(const HttpRequest& request, ReplyFn reply) {
  if (request.target != "/metrics" || request.method != "GET")
    return reply(error_reply(404, "the metrics port serves GET /metrics only"));
  HttpReply r;
  r.content_type = "text/plain; version=0.0.4";
  r.body = metrics_.prometheus_text();
  reply(std::move(r));
}

void Router::handle(const HttpRequest& request, ReplyFn reply) {
  const size_t q = request.target.find('?');
  const std::string path = request.target.substr(0, q);
  const std::string query = q == std::string::npos ? "" : request.target.substr(q + 1);
  const std::vector<std::string> p = split_path(path);
  const bool get = request.method == "GET", post = request.method == "POST";
  try {
    if (p.empty() || p[0] != "v2") return reply(error_reply(404, "not found: " + path));
    if (p.size() == 1 && get)
      return reply(json_reply(200, {{"name", "convoy"},
                                    {"version", CONVOY_VERSION},
                                    {"extensions", {"binary_tensor_data", "model_repository", "classification"}}}));
    if (p.size() == 3 && p[1] == "health" && get) {
      if (p[2] == "live") return reply(json_reply(200, json::object()));
      if (p[2] == "ready") return reply(ready_ ? json_reply(200, json::object()) : error_reply(503, "not ready"));
    }
    if (p.size() >= 2 && p[1] == "repository" && post) {
      if (p.size() == 3 && p[2] == "index") {
        json index = json::array();
        for (const IndexEntry& e : repository_.index()) {
          json item = {{"name", e.name}, {"state", e.state}, {"reason", e.reason}};
          if (!e.version.empty()) item["version"] = e.version;
          index.push_back(std::move(item));
        }
        return reply(json_reply(200, index));
      }
      if (p.size() == 5 && p[2] == "models" && (p[4] == "load" || p[4] == "unload")) {
        if (repository_.control() != ModelControl::explicit_)
          return reply(error_reply(400, "explicit model load / unload is not allowed unless --model-control explicit"));
        if (p[4] == "load")
          repository_.load(p[3]);
        else
          repository_.unload(p[3]);
        return reply(json_reply(200, json::object()));
      }
    }
    if (p.size() >= 3 && p[1] == "models") {
      const std::string& model = p[2];
      int64_t version = 0;
      size_t rest = 3;
      if (p.size() >= 5 && p[3] == "versions") {
        version = parse_version(p[4]);
        if (version == 0) return reply(error_reply(400, "bad version '" + p[4] + "'"));
        rest = 5;
      }
      const std::string action = p.size() == rest ? "" : p.size() == rest + 1 ? p[rest] : "?";
      if (action.empty() && get) return reply(model_metadata(model, version));
      if (action == "config" && get) return reply(model_config(model, version));
      if (action == "ready" && get) {
        std::string why;
        return reply(repository_.find(model, version, why) ? json_reply(200, json::object()) : error_reply(400, why));
      }
      if (action == "infer" && post) return infer(model, version, request, reply);
      if (action == "classify" && post) {
        const std::string k = query_value(query, "top_k", "5");
        const int64_t top_k = parse_version(k);
        if (top_k == 0) return reply(error_reply(400, "top_k must be a positive integer, got '" + k + "'"));
        return classify(model, version, request, top_k, reply);
      }
    }
    return reply(error_reply(404, "no endpoint " + request.method + " " + path));
  } catch (const RequestError& e) {
    return reply(error_reply(e.status(), e.what()));
  } catch (const Error& e) {
    return reply(error_reply(400, e.what()));
  }
}

HttpReply Router::model_metadata(const std::string& model, int64_t version) {
  std::string why;
  const std::shared_ptr<ServedVersion> served = repository_.find(model, version, why);
  if (!served) return error_reply(404, why);
  json versions = json::array();
  for (int64_t v : repository_.ready_versions(model)) versions.push_back(std::to_string(v));
  const Shape& in = served->input_shape();
  return json_reply(200, {{"name", model},
                          {"versions", versions},
                          {"platform", "convoy"},
                          {"inputs", {{{"name", kInputName}, {"datatype", "FP32"}, {"shape", {-1, in[0], in[1], in[2]}}}}},
                          {"outputs",
                           {{{"name", kLogitsName}, {"datatype", "FP32"}, {"shape", {-1, served->classes()}}},
                            {{"name", kProbabilitiesName}, {"datatype", "FP32"}, {"shape", {-1, served->classes()}}}}}});
}

HttpReply Router::model_config(const std::string& model, int64_t version) {
  std::string why;
  const std::shared_ptr<ServedVersion> served = repository_.find(model, version, why);
  if (!served) return error_reply(404, why);
  const ModelConfig& c = served->config();
  json doc = {{"name", model},
              {"platform", "convoy"},
              {"max_batch_size", c.max_batch_size},
              {"instance_group", {{{"count", c.instance_count}, {"kind", served->device()}}}},
              {"max_memory", c.max_memory},
              {"estimated_memory", served->memory().total},
              {"class_names", served->class_names()}};
  if (c.dynamic_batching)
    doc["dynamic_batching"] = {{"max_queue_delay_microseconds", c.max_queue_delay_us},
                               {"preferred_batch_size", c.preferred_batch_size},
                               {"max_queue_size", c.max_queue_size},
                               {"default_timeout_microseconds", c.default_timeout_us}};
  return json_reply(200, doc);
}

void Router::infer(const std::string& model, int64_t version, const HttpRequest& request, const ReplyFn& reply) {
  std::string why;
  std::shared_ptr<ServedVersion> served = repository_.find(model, version, why);
  if (!served) return reply(error_reply(404, why));
  const TensorSpec spec{served->input_shape(), served->config().max_batch_size, served->classes()};
  auto parsed = std::make_shared<InferRequest>(parse_infer_request(request.body, request.inference_header_length, spec));
  const int64_t classes = served->classes(), v = served->version();
  Tensor input = parsed->input;
  run_job(served, metrics_, std::move(input), std::move(parsed->encoded), parsed->timeout_us,
          [parsed, model, v, classes](InferResult& r) {
            InferReplyBody body = make_infer_reply(*parsed, model, v, r.logits, r.probabilities, classes);
            HttpReply out;
            out.body = std::move(body.body);
            out.inference_header_length = body.header_length;
            if (out.inference_header_length) out.content_type = "application/octet-stream";
            return out;
          },
          reply);
}

void Router::classify(const std::string& model, int64_t version, const HttpRequest& request, int64_t top_k,
                      const ReplyFn& reply) {
  std::string why;
  std::shared_ptr<ServedVersion> served = repository_.find(model, version, why);
  if (!served) return reply(error_reply(404, why));
  if (request.body.empty()) return reply(error_reply(400, "classify: the body must be a JPEG or PNG image"));
  // Decoded by the model's instance (nvJPEG on a GPU), not on this I/O thread; an unreadable
  // image is a 400 from there.
  const std::vector<std::string> names = served->class_names();
  const int64_t v = served->version();
  run_job(served, metrics_, Tensor{}, {request.body}, 0,
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
