#include "cli/infer_output.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <numeric>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"

namespace convoy::cli {

namespace {

// A float as the shortest text that reads back to the same float: 9 significant digits.
// JSON has no nan or inf: they are null there, "nan"/"inf"/"-inf" in CSV (as Python's float() reads).
std::string number(float x, bool json) {
  if (!std::isfinite(x)) return json ? "null" : std::isnan(x) ? "nan" : x > 0 ? "inf" : "-inf";
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", static_cast<double>(x));
  return text;
}

// A path need not be UTF-8: invalid bytes become U+FFFD rather than fail the run.
std::string json_string(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// RFC 4180: a field holding a comma, a quote or a line break is quoted, its quotes doubled.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

std::vector<std::string> infer_output_names() { return {"text", "json", "jsonl", "csv"}; }

InferOutputFormat infer_output_from_name(const std::string& name) {
  if (name == "json") return InferOutputFormat::json;
  if (name == "jsonl") return InferOutputFormat::jsonl;
  if (name == "csv") return InferOutputFormat::csv;
  if (name == "text") return InferOutputFormat::text;
  throw InputError("--output " + name + ": expected text, json, jsonl or csv");
}

PredictionWriter::PredictionWriter(const InferOutputOptions& options, std::vector<std::string> class_names)
    : options_(options), class_names_(std::move(class_names)) {
  if (options_.logits && options_.format == InferOutputFormat::text)
    throw InputError("--logits: the text output shows the top-k only; use --output json, jsonl or csv");
  k_ = static_cast<size_t>(std::clamp<int64_t>(options_.top_k, 1, static_cast<int64_t>(class_names_.size())));
  if (!options_.path.empty()) file_ = std::make_unique<OutputFile>(options_.path, "the predictions");
  if (options_.format == InferOutputFormat::csv) emit(csv_header());
}

PredictionWriter::~PredictionWriter() = default;

void PredictionWriter::emit(const std::string& text) {
  if (file_) {
    file_->write(text);
  } else {
    std::cout << text;
    if (!std::cout) throw InputError("stdout: cannot write the predictions");
  }
}

void PredictionWriter::add(const std::string& file, const float* probabilities, const float* logits) {
  std::vector<int> order(class_names_.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + static_cast<long>(k_), order.end(),
                    [&](int x, int y) { return probabilities[x] > probabilities[y]; });
  order.resize(k_);
  switch (options_.format) {
    case InferOutputFormat::text:
      emit(text_record(file, probabilities, order));
      break;
    case InferOutputFormat::json:
      emit((records_ ? ",\n" : "[\n") + json_record(file, probabilities, logits, order));
      break;
    case InferOutputFormat::jsonl:
      emit(json_record(file, probabilities, logits, order) + "\n");
      break;
    case InferOutputFormat::csv:
      emit(csv_record(file, probabilities, logits, order));
      break;
  }
  ++records_;
}

void PredictionWriter::finish() {
  if (options_.format == InferOutputFormat::json) emit(records_ ? "\n]\n" : "[]\n");
  if (file_) {
    file_->commit();
  } else {
    std::cout.flush();
    if (!std::cout) throw InputError("stdout: cannot write the predictions");
  }
}

std::string PredictionWriter::text_record(const std::string& file, const float* probabilities,
                                          const std::vector<int>& order) const {
  std::string out = file + ":";
  char p[32];
  for (size_t i = 0; i < order.size(); ++i) {
    std::snprintf(p, sizeof p, "%.3f", static_cast<double>(probabilities[order[i]]));
    out += (i ? ", " : " ") + class_names_[static_cast<size_t>(order[i])] + " " + p;
  }
  return out + "\n";
}

// {"file": F, "top_k": [{"label": L, "index": I, "probability": P}, ...], "logits": [...]}
std::string PredictionWriter::json_record(const std::string& file, const float* probabilities, const float* logits,
                                          const std::vector<int>& order) const {
  std::string out = "{\"file\": " + json_string(file) + ", \"top_k\": [";
  for (size_t i = 0; i < order.size(); ++i) {
    const int c = order[i];
    out += (i ? ", " : "") + std::string("{\"label\": ") + json_string(class_names_[static_cast<size_t>(c)]) +
           ", \"index\": " + std::to_string(c) + ", \"probability\": " + number(probabilities[c], true) + "}";
  }
  out += "]";
  if (options_.logits && logits) {
    out += ", \"logits\": [";
    for (size_t c = 0; c < class_names_.size(); ++c) out += (c ? ", " : "") + number(logits[c], true);
    out += "]";
  }
  return out + "}";
}

// file,top1_label,top1_index,top1_probability,...[,logit_0,...,logit_{classes-1}]
std::string PredictionWriter::csv_header() const {
  std::string out = "file";
  for (size_t i = 1; i <= k_; ++i) {
    const std::string rank = "top" + std::to_string(i);
    out += "," + rank + "_label," + rank + "_index," + rank + "_probability";
  }
  if (options_.logits)
    for (size_t c = 0; c < class_names_.size(); ++c) out += ",logit_" + std::to_string(c);
  return out + "\n";
}

std::string PredictionWriter::csv_record(const std::string& file, const float* probabilities, const float* logits,
                                         const std::vector<int>& order) const {
  // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "," + std::string chains.
  std::string out = csv_field(file);
  for (const int c : order) {
    out += ',';
    out += csv_field(class_names_[static_cast<size_t>(c)]);
    out += ',';
    out += std::to_string(c);
    out += ',';
    out += number(probabilities[c], false);
  }
  if (options_.logits && logits)
    for (size_t c = 0; c < class_names_.size(); ++c) {
      out += ',';
      out += number(logits[c], false);
    }
  out += '\n';
  return out;
}

}  // namespace convoy::cli
