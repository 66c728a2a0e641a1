#include "engine/train/tensorboard.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>

#include "engine/core/error.h"
#include "engine/core/file_io.h"

namespace convoy {

namespace {

// The table of the reflected Castagnoli polynomial (0x1EDC6F41, reversed 0x82F63B78).
constexpr std::array<uint32_t, 256> kCrc32cTable = [] {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}();

// Protobuf's wire format, the parts the events need: varints (wire type 0), 64-bit (1),
// length-delimited (2) and 32-bit (5) fields.
void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void tag(std::string& out, int field, int wire_type) { varint(out, static_cast<uint64_t>(field) << 3 | wire_type); }
void bytes_field(std::string& out, int field, std::string_view bytes) {
  tag(out, field, 2);
  varint(out, bytes.size());
  out.append(bytes);
}
void varint_field(std::string& out, int field, uint64_t v) {
  tag(out, field, 0);
  varint(out, v);
}
template <typename T>
void fixed_field(std::string& out, int field, T value) {  // double: wire type 1, float: 5
  static_assert(sizeof(T) == 8 || sizeof(T) == 4);
  tag(out, field, sizeof(T) == 8 ? 1 : 5);
  char raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T));  // little-endian, as protobuf wants (x86-64 and ARM64)
  out.append(raw, sizeof(T));
}

// Event's fields (event.proto) and the other messages' (summary.proto, tensor.proto).
constexpr int kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventSummary = 5, kEventSessionLog = 7;
constexpr int kSummaryValue = 1;
constexpr int kValueTag = 1, kValueSimpleValue = 2, kValueTensor = 8, kValueMetadata = 9;
constexpr int kMetadataPluginData = 1, kPluginName = 1;
constexpr int kTensorDtype = 1, kTensorShape = 2, kTensorStringVal = 8;
constexpr int kDtString = 7;  // types.proto's DT_STRING
constexpr int kSessionLogStatus = 1, kSessionStart = 1;

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace

uint32_t crc32c(const void* data, size_t bytes, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
  for (size_t i = 0; i < bytes; ++i) crc = kCrc32cTable[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

uint32_t masked_crc32c(const void* data, size_t bytes) {
  const uint32_t crc = crc32c(data, bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& dir, int64_t start_step) {
  create_output_directories(dir, "the TensorBoard directory");
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
      std::chrono::system_clock::now().time_since_epoch()).count();
  path_ = dir / ("events.out.tfevents." + std::to_string(seconds) + "." + host_name() + "." + std::to_string(getpid()));
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_) throw InputError(file_message(path_, std::string("cannot create the TensorBoard event file: ") + std::strerror(errno)));
  std::string version;
  bytes_field(version, kEventFileVersion, "brain.Event:2");
  write_event(0, 0, version);
  if (start_step > 0) {
    std::string session;
    varint_field(session, kSessionLogStatus, kSessionStart);
    std::string log;
    bytes_field(log, kEventSessionLog, session);
    write_event(start_step, 0, log);
  }
  flush();
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardWriter::scalar(std::string_view name, int64_t step, double value) {
  std::string v;
  bytes_field(v, kValueTag, name);
  fixed_field(v, kValueSimpleValue, static_cast<float>(value));
  std::string summary;
  bytes_field(summary, kSummaryValue, v);
  write_event(step, kEventSummary, summary);
}

void TensorBoardWriter::text(std::string_view name, int64_t step, std::string_view markdown) {
  std::string plugin, metadata, tensor, shape, v, summary;
  bytes_field(plugin, kPluginName, "text");
  bytes_field(metadata, kMetadataPluginData, plugin);
  varint_field(tensor, kTensorDtype, kDtString);
  bytes_field(tensor, kTensorShape, shape);  // no dimensions: a scalar string
  bytes_field(tensor, kTensorStringVal, markdown);
  bytes_field(v, kValueTag, name);
  bytes_field(v, kValueTensor, tensor);
  bytes_field(v, kValueMetadata, metadata);
  bytes_field(summary, kSummaryValue, v);
  write_event(step, kEventSummary, summary);
}

// `payload` is the event's remaining fields already encoded; with `field` 0 it is used as it
// is, else it is the message of that field.
void TensorBoardWriter::write_event(int64_t step, int field, const std::string& payload) {
  const double wall_time =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::string event;
  fixed_field(event, kEventWallTime, wall_time);
  varint_field(event, kEventStep, static_cast<uint64_t>(step));
  if (field == 0)
    event += payload;
  else
    bytes_field(event, field, payload);
  write_record(event);
}

void TensorBoardWriter::write_record(const std::string& data) {
  const uint64_t length = data.size();  // little-endian on the machines we build for
  const uint32_t length_crc = masked_crc32c(&length, sizeof(length));
  const uint32_t data_crc = masked_crc32c(data.data(), data.size());
  const bool ok = std::fwrite(&length, sizeof(length), 1, file_) == 1 &&
                  std::fwrite(&length_crc, sizeof(length_crc), 1, file_) == 1 &&
                  std::fwrite(data.data(), 1, data.size(), file_) == data.size() &&
                  std::fwrite(&data_crc, sizeof(data_crc), 1, file_) == 1;
  if (!ok) throw InputError(file_message(path_, std::string("cannot write the TensorBoard event file: ") + std::strerror(errno)));
}

void TensorBoardWriter::flush() {
  if (std::fflush(file_) != 0)
    throw InputError(file_message(path_, std::string("cannot write the TensorBoard event file: ") + std::strerror(errno)));
}

}  // namespace convoy
