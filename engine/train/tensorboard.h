#pragma once
// TensorBoard event files for a training run (`output.tensorboard: true`): TFRecord framing (a
// length and the data, each followed by its masked CRC-32C) around `tensorboard.Event` protobufs,
// as TensorBoard's own writers make them. The few messages and fields written here (Event,
// Summary, SummaryMetadata, TensorProto, SessionLog) are encoded directly: field numbers from
// TensorBoard's event.proto, summary.proto and tensor.proto, so that training needs neither a
// protobuf compiler nor TensorFlow.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace convoy {

// CRC-32C (Castagnoli, reflected, the checksum TFRecord uses) and TFRecord's masking of it.
uint32_t crc32c(const void* data, size_t bytes, uint32_t crc = 0);
uint32_t masked_crc32c(const void* data, size_t bytes);

class TensorBoardWriter {
 public:
  // A new event file in `dir` (events.out.tfevents.<unix seconds>.<host>.<pid>, the name
  // TensorBoard looks for), opened with its file_version event. A run resumed at `start_step`
  // also writes SessionLog START there: TensorBoard then drops the events at that step and
  // after that the interrupted run wrote, which this run writes again.
  TensorBoardWriter(const std::filesystem::path& dir, int64_t start_step);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  const std::filesystem::path& path() const { return path_; }
  void scalar(std::string_view tag, int64_t step, double value);
  // Shown by TensorBoard's text plugin (Markdown).
  void text(std::string_view tag, int64_t step, std::string_view markdown);
  // Written through to the file, so that a TensorBoard watching the run sees it now.
  void flush();

 private:
  void write_event(int64_t step, int field, const std::string& payload);
  void write_record(const std::string& data);

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

}  // namespace convoy
