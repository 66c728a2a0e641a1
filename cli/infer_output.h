#pragma once
// What `convoy infer` writes per image: text for people (the top-k at three decimals), or JSON,
// JSON lines or CSV for scripts (the top-k labels, indices and probabilities and, with --logits,
// every raw logit, each float at full precision), to stdout or atomically to a file.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/file_io.h"

namespace convoy::cli {

enum class InferOutputFormat { text, json, jsonl, csv };

// "text", "json", "jsonl", "csv": --output's choices.
std::vector<std::string> infer_output_names();
InferOutputFormat infer_output_from_name(const std::string& name);

struct InferOutputOptions {
  InferOutputFormat format = InferOutputFormat::text;
  std::string path;     // empty: stdout
  bool logits = false;  // every class's raw logit too (not with text)
  int64_t top_k = 3;    // 1 or more; more than the classes gives them all
};

// Writes one record per image as they come, then the end of the document. A file is written through
// OutputFile: it appears, whole, at finish(); a run that fails before leaves no partial file.
class PredictionWriter {
 public:
  PredictionWriter(const InferOutputOptions& options, std::vector<std::string> class_names);
  ~PredictionWriter();
  PredictionWriter(const PredictionWriter&) = delete;
  PredictionWriter& operator=(const PredictionWriter&) = delete;

  // One image: `probabilities` and `logits` point at its row of `classes` floats (logits may be
  // null when options.logits is off).
  void add(const std::string& file, const float* probabilities, const float* logits);
  // Closes the document (the JSON array) and commits the file.
  void finish();

 private:
  void emit(const std::string& text);
  std::string text_record(const std::string& file, const float* probabilities, const std::vector<int>& order) const;
  std::string json_record(const std::string& file, const float* probabilities, const float* logits,
                          const std::vector<int>& order) const;
  std::string csv_header() const;
  std::string csv_record(const std::string& file, const float* probabilities, const float* logits,
                         const std::vector<int>& order) const;

  InferOutputOptions options_;
  std::vector<std::string> class_names_;
  size_t k_ = 1;
  int64_t records_ = 0;
  std::unique_ptr<OutputFile> file_;  // null: stdout
};

}  // namespace convoy::cli
