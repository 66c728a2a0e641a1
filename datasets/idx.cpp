#include "datasets/idx.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "engine/core/file_io.h"
#include "engine/core/error.h"

namespace convoy {
namespace {

constexpr std::string_view kMissingHint =
    "; install Debian's dataset-fashion-mnist or set dataset.path";
// Deflate cannot expand data by more than about 1032:1, so a gzip file of S bytes never
// holds more than this many times S; lets us reject absurd dims before allocating.
constexpr uint64_t kMaxDeflateRatio = 1032;
constexpr int kMaxDims = 8;

std::string hex_byte(uint8_t b) {
  static constexpr char digits[] = "0123456789abcdef";
  return {digits[b >> 4], digits[b & 15]};
}

std::string element_type_name(uint8_t code) {
  switch (code) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return "unknown";
  }
}

// The bytes of a file, inflated on the fly when it is gzip (possibly several members).
class ByteSource {
 public:
  ByteSource(InputFile& file, bool gzip) : file_(file), gzip_(gzip) {
    if (!gzip_) return;
    in_.resize(1 << 16);
    std::memset(&zs_, 0, sizeof zs_);
    if (inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK) file_.fail("cannot initialize zlib");
  }
  ~ByteSource() {
    if (gzip_) inflateEnd(&zs_);
  }
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  // Up to `bytes` bytes; fewer only where the data ends. Throws on corrupt gzip data.
  size_t read(void* dst, size_t bytes) {
    if (!gzip_) return file_.read_some(dst, bytes);
    auto* out = static_cast<unsigned char*>(dst);
    size_t got = 0;
    while (got < bytes) {
      if (zs_.avail_in == 0 && !input_eof_) {
        const size_t n = file_.read_some(in_.data(), in_.size());
        if (n == 0) input_eof_ = true;
        zs_.next_in = in_.data();
        zs_.avail_in = static_cast<uInt>(n);
      }
      if (stream_end_) {
        if (zs_.avail_in == 0) break;  // input_eof_ is set: the clean end of the data
        // Bytes follow the gzip member: another member (as `cat a.gz b.gz` makes) or junk.
        if (inflateReset(&zs_) != Z_OK) file_.fail("cannot reset zlib");
        stream_end_ = false;
        ++member_;
      }
      if (zs_.avail_in == 0)  // input_eof_ is set and the member is unfinished
        file_.fail("truncated gzip stream (the file ends inside the compressed data)");
      const size_t chunk = std::min<size_t>(bytes - got, size_t{1} << 30);
      zs_.next_out = out + got;
      zs_.avail_out = static_cast<uInt>(chunk);
      const int ret = inflate(&zs_, Z_NO_FLUSH);
      got += chunk - zs_.avail_out;
      if (ret == Z_STREAM_END) {
        stream_end_ = true;
      } else if (ret == Z_OK || (ret == Z_BUF_ERROR && zs_.avail_in == 0)) {
        continue;  // needs more input, fetched at the top of the loop
      } else if (member_ > 0 && zs_.total_out == 0 && ret == Z_DATA_ERROR) {
        file_.fail("trailing garbage after the gzip stream");
      } else {
        file_.fail(std::string("corrupt gzip data (") +
                   (zs_.msg ? zs_.msg : "zlib error " + std::to_string(ret)) + ")");
      }
    }
    return got;
  }

 private:
  InputFile& file_;
  bool gzip_;
  z_stream zs_{};
  std::vector<unsigned char> in_;
  bool input_eof_ = false;
  bool stream_end_ = false;
  int member_ = 0;
};

}  // namespace

IdxArray read_idx(const std::filesystem::path& path) {
  InputFile file(path, kMissingHint);
  std::array<uint8_t, 4> head{};
  const size_t sniffed = file.read_some(head.data(), 2);
  const bool gzip = sniffed == 2 && head[0] == 0x1f && head[1] == 0x8b;
  file.seek(0);
  ByteSource source(file, gzip);

  const size_t got = source.read(head.data(), head.size());
  if (got < head.size())
    file.fail("truncated: expected a 4-byte IDX header, found " + std::to_string(got) + " bytes");
  if (head[0] != 0 || head[1] != 0)
    file.fail("not an IDX file: expected magic 00 00 <type> <ndims>, found " + hex_byte(head[0]) +
              " " + hex_byte(head[1]) + " " + hex_byte(head[2]) + " " + hex_byte(head[3]));
  const uint8_t type = head[2];
  if (type != 0x08)
    file.fail("IDX element type 0x" + hex_byte(type) + " (" + element_type_name(type) +
              ") is not supported, expected 0x08 (unsigned byte)");
  const int ndim = head[3];
  if (ndim < 1 || ndim > kMaxDims)
    file.fail("IDX header has " + std::to_string(ndim) + " dimensions, expected 1 to " +
              std::to_string(kMaxDims));

  std::array<uint8_t, 4 * kMaxDims> raw_dims{};
  const size_t dims_bytes = 4 * static_cast<size_t>(ndim);
  if (source.read(raw_dims.data(), dims_bytes) != dims_bytes)
    file.fail("truncated: the file ends inside the IDX header (" + std::to_string(ndim) +
              " dimensions announced)");
  Shape dims;
  uint64_t payload = 1;
  bool overflow = false;
  for (int i = 0; i < ndim; ++i) {
    const uint8_t* p = raw_dims.data() + 4 * i;
    const uint64_t d = (uint64_t{p[0]} << 24) | (uint64_t{p[1]} << 16) | (uint64_t{p[2]} << 8) | p[3];
    dims.push_back(static_cast<int64_t>(d));
    if (d != 0 && payload > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / d)
      overflow = true;
    else
      payload *= d;
  }
  if (overflow) file.fail("IDX dims " + shape_str(dims) + " overflow: the element count exceeds 2^63");
  const uint64_t header_bytes = 4 + dims_bytes;

  if (!gzip) {
    const uint64_t available = file.size() > header_bytes ? file.size() - header_bytes : 0;
    if (payload > available)
      file.fail("truncated: IDX dims " + shape_str(dims) + " need " + std::to_string(payload) +
                " bytes of data, the file has " + std::to_string(available));
    if (payload < available)
      file.fail("trailing garbage: " + std::to_string(available - payload) +
                " bytes after the data of IDX dims " + shape_str(dims));
    Tensor data = Tensor::empty(dims, DType::u8);
    file.read_exact(data.raw(), payload, "IDX data");
    return {std::move(data)};
  }

  if (payload / kMaxDeflateRatio > file.size())
    file.fail("IDX dims " + shape_str(dims) + " need " + std::to_string(payload) +
              " bytes, more than a " + std::to_string(file.size()) + "-byte gzip file can hold");
  // The true size is known only once inflated, so grow a buffer as bytes arrive instead
  // of trusting the header with one big allocation.
  std::vector<uint8_t> buffer;
  while (buffer.size() < payload) {
    const size_t old = buffer.size();
    const size_t step = static_cast<size_t>(
        std::min<uint64_t>(payload - old, std::max<uint64_t>(old, uint64_t{1} << 20)));
    buffer.resize(old + step);
    const size_t n = source.read(buffer.data() + old, step);
    if (n < step)
      file.fail("truncated: IDX dims " + shape_str(dims) + " need " + std::to_string(payload) +
                " bytes of data, the decompressed file has " + std::to_string(old + n));
  }
  uint8_t extra = 0;
  if (source.read(&extra, 1) != 0)
    file.fail("trailing garbage: the decompressed file has more than the " +
              std::to_string(payload) + " bytes of data of IDX dims " + shape_str(dims));
  Tensor data = Tensor::empty(dims, DType::u8);
  if (payload) std::memcpy(data.raw(), buffer.data(), payload);
  return {std::move(data)};
}

}  // namespace convoy
