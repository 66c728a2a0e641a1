#include "engine/checkpoint/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "engine/core/file_io.h"
#include "engine/core/error.h"

namespace convoy {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

namespace {

// The reference implementation refuses larger headers; so do we.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// Host bytes of `t` in its logical (N, C, H, W) order.
Tensor host_nchw(const Tensor& t) {
  Tensor host = t.device().is_cpu() ? t : t.to_cpu();
  if (host.layout() == Layout::nchw) return host;
  // nhwc memory: permute element by element (checkpointing is not a hot path).
  const int64_t n = t.dim(0), c = t.dim(1), h = t.dim(2), w = t.dim(3);
  const size_t es = dtype_size(t.dtype());
  Tensor out = Tensor::empty(t.shape(), t.dtype());
  const auto* src = static_cast<const char*>(host.raw());
  auto* dst = static_cast<char*>(out.raw());
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t ih = 0; ih < h; ++ih)
        for (int64_t iw = 0; iw < w; ++iw)
          std::memcpy(dst + static_cast<size_t>(((in * c + ic) * h + ih) * w + iw) * es,
                      src + static_cast<size_t>(((in * h + ih) * w + iw) * c + ic) * es, es);
  return out;
}

std::string build_header(std::span<const NamedTensor> tensors,
                          const std::map<std::string, std::string>& metadata,
                          const std::filesystem::path& path) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header["__metadata__"] = std::move(meta);
  }
  std::set<std::string_view> seen;
  uint64_t offset = 0;
  for (const NamedTensor& nt : tensors) {
    CONVOY_CHECK(nt.tensor.defined(), "checkpoint tensor '" + nt.name + "' is undefined");
    CONVOY_CHECK(nt.name != "__metadata__", "a tensor cannot be named __metadata__");
    CONVOY_CHECK(seen.insert(nt.name).second, "duplicate checkpoint tensor name '" + nt.name + "'");
    const uint64_t bytes = nt.tensor.nbytes();
    header[nt.name] = {{"dtype", std::string(dtype_name(nt.tensor.dtype()))},
                       {"shape", nt.tensor.shape()},
                       {"data_offsets", nlohmann::ordered_json::array({offset, offset + bytes})}};
    offset += bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {  // names or metadata that are not UTF-8
    throw InputError(file_message(path, std::string("cannot write the header: ") + e.what()));
  }
  // Pad so the data starts 8-byte aligned, as the reference writer does.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

void write_safetensors(OutputFile& out, std::span<const NamedTensor> tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string header = build_header(tensors, metadata, out.path());
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(uint64_t{header.size()} >> (8 * i));
  out.write(length, sizeof length);
  out.write(header);
  for (const NamedTensor& nt : tensors) {
    const Tensor host = host_nchw(nt.tensor);
    out.write(host.raw(), host.nbytes());
  }
}

void write_safetensors(const std::filesystem::path& path, std::span<const NamedTensor> tensors,
                       const std::map<std::string, std::string>& metadata) {
  OutputFile out(path, "the checkpoint");
  write_safetensors(out, tensors, metadata);
  out.commit();
}

bool SafetensorsFile::contains(std::string_view name) const {
  return std::any_of(tensors.begin(), tensors.end(), [&](const NamedTensor& t) { return t.name == name; });
}

const Tensor& SafetensorsFile::at(std::string_view name) const {
  for (const NamedTensor& t : tensors)
    if (t.name == name) return t.tensor;
  throw InputError(file_message(path, "has no tensor '" + std::string(name) + "'"));
}

namespace {

// Bytes per element of the safetensors dtypes Convoy has no DType for (0: not a dtype).
size_t foreign_dtype_size(const std::string& name) {
  static constexpr std::pair<std::string_view, size_t> kSizes[] = {
      {"BOOL", 1}, {"I8", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I16", 2}, {"U16", 2},
      {"U32", 4},  {"I64", 8}, {"U64", 8},     {"F64", 8}};
  for (const auto& [n, bytes] : kSizes)
    if (n == name) return bytes;
  return 0;
}

}  // namespace

SafetensorsFile read_safetensors(const std::filesystem::path& path, ForeignDtypes foreign) {
  InputFile file(path);
  const uint64_t size = file.size();
  if (size < 8)
    file.fail("not a safetensors file: " + std::to_string(size) +
              " bytes, too short for the 8-byte header length");
  uint8_t length[8];
  file.read_exact(length, sizeof length, "header length");
  uint64_t header_bytes = 0;
  for (int i = 0; i < 8; ++i) header_bytes |= uint64_t{length[i]} << (8 * i);
  if (header_bytes > size - 8)
    file.fail("not a safetensors file: header length " + std::to_string(header_bytes) +
              " exceeds the file size (" + std::to_string(size) + " bytes)");
  if (header_bytes > kMaxHeaderBytes)
    file.fail("header length " + std::to_string(header_bytes) + " exceeds the limit of " +
              std::to_string(kMaxHeaderBytes) + " bytes");
  std::string text(header_bytes, '\0');
  file.read_exact(text.data(), text.size(), "JSON header");
  const uint64_t data_bytes = size - 8 - header_bytes;

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e999
    std::string what = e.what();
    if (auto p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    file.fail("invalid JSON header: " + what);
  }
  if (!header.is_object()) file.fail("header is not a JSON object");

  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin, end;
    std::string foreign;  // a dtype Convoy has none for, skipped (ForeignDtypes::skip)
  };
  std::vector<Entry> entries;
  SafetensorsFile result;
  result.path = path;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) file.fail("__metadata__ is not a JSON object of strings");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) file.fail("__metadata__ value for '" + mk + "' is not a string");
        result.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + key + "': ";
    if (!value.is_object()) file.fail(where + "expected an object with dtype, shape, data_offsets");
    for (const auto& [field, _] : value.items())
      if (field != "dtype" && field != "shape" && field != "data_offsets")
        file.fail(where + "unknown field '" + field + "' (expected dtype, shape, data_offsets)");
    Entry e;
    e.name = key;
    if (!value.contains("dtype") || !value["dtype"].is_string()) file.fail(where + "missing string 'dtype'");
    size_t es = 0;
    try {
      e.dtype = dtype_from_name(value["dtype"].get<std::string>());
      es = dtype_size(e.dtype);
    } catch (const InputError& err) {
      e.foreign = value["dtype"].get<std::string>();
      es = foreign == ForeignDtypes::skip ? foreign_dtype_size(e.foreign) : 0;
      if (es == 0) file.fail(where + err.what());
    }
    if (!value.contains("shape") || !value["shape"].is_array())
      file.fail(where + "missing 'shape' array");
    uint64_t numel = 1;
    for (const auto& d : value["shape"]) {
      if (!d.is_number_unsigned()) file.fail(where + "shape entries must be non-negative integers");
      const uint64_t v = d.get<uint64_t>();
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          (v != 0 && numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / v))
        file.fail(where + "shape " + value["shape"].dump() + " overflows");
      numel *= v;
      e.shape.push_back(static_cast<int64_t>(v));
    }
    const auto& offs = value.contains("data_offsets") ? value["data_offsets"] : nlohmann::json();
    if (!offs.is_array() || offs.size() != 2 || !offs[0].is_number_unsigned() ||
        !offs[1].is_number_unsigned())
      file.fail(where + "'data_offsets' must be [begin, end] with non-negative integers");
    e.begin = offs[0].get<uint64_t>();
    e.end = offs[1].get<uint64_t>();
    const std::string range = "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
    if (e.begin > e.end) file.fail(where + range + " end before they begin");
    if (e.end > data_bytes)
      file.fail(where + range + " are out of range: the file holds " + std::to_string(data_bytes) +
                " bytes of data");
    if (numel > std::numeric_limits<uint64_t>::max() / es || numel * es != e.end - e.begin)
      file.fail(where + "shape " + shape_str(e.shape) + " of " +
                (e.foreign.empty() ? std::string(dtype_name(e.dtype)) : e.foreign) +
                " needs " + std::to_string(numel) + " x " + std::to_string(es) + " bytes, but " +
                range + " span " + std::to_string(e.end - e.begin));
    entries.push_back(std::move(e));
  }

  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    if (e.begin < expected)
      file.fail("tensor '" + e.name + "' overlaps tensor '" + entries[i - 1].name + "' in the data");
    if (e.begin > expected)
      file.fail(std::to_string(e.begin - expected) + " unused bytes in the data before tensor '" +
                e.name + "'");
    expected = e.end;
  }
  if (expected != data_bytes)
    file.fail(std::to_string(data_bytes - expected) + " trailing bytes after the tensors' data");

  // Every range is now inside the file, so allocating these sizes is safe.
  for (const Entry& e : entries) {
    if (!e.foreign.empty()) {
      std::vector<char> skipped(e.end - e.begin);
      file.read_exact(skipped.data(), skipped.size(), "tensor '" + e.name + "' data");
      result.skipped.push_back({e.name, e.foreign});
      continue;
    }
    Tensor t = Tensor::empty(e.shape, e.dtype);
    file.read_exact(t.raw(), t.nbytes(), "tensor '" + e.name + "' data");
    result.tensors.push_back({e.name, std::move(t)});
  }
  return result;
}

}  // namespace convoy
