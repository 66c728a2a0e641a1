#include "apps/serve/compression.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <vector>

namespace convoy::serve {

namespace {

std::string lower_trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// zlib's windowBits: 15 + 16 is the gzip wrapper, 15 the zlib one, -15 raw deflate.
constexpr int kGzipWindow = 15 + 16, kZlibWindow = 15, kRawWindow = -15;

// One inflate pass with `window_bits`; output grows in chunks and stops past `max_bytes`.
InflateResult inflate_with(std::string_view body, int window_bits, uint64_t max_bytes) {
  InflateResult out;
  z_stream z{};
  if (inflateInit2(&z, window_bits) != Z_OK) throw std::runtime_error("zlib: inflateInit2 failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  z.avail_in = static_cast<uInt>(body.size());
  constexpr size_t kChunk = 64 << 10;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (out.body.size() > max_bytes) break;
    const size_t have = out.body.size();
    // Never more room than the bound allows, plus one byte to see that it was passed.
    const size_t room = static_cast<size_t>(std::min<uint64_t>(kChunk, max_bytes - have + 1));
    out.body.resize(have + room);
    z.next_out = reinterpret_cast<Bytef*>(out.body.data() + have);
    z.avail_out = static_cast<uInt>(room);
    rc = inflate(&z, Z_NO_FLUSH);
    out.body.resize(have + (room - z.avail_out));
    if (rc == Z_STREAM_END) break;
    if (rc == Z_BUF_ERROR) {  // no progress with room to write: the input ended before the stream
      out.status = InflateResult::Status::corrupt;
      out.error = "the compressed data is truncated";
      break;
    }
    if (rc != Z_OK) {
      out.status = InflateResult::Status::corrupt;
      out.error = z.msg ? z.msg : "zlib error " + std::to_string(rc);
      break;
    }
  }
  if (out.status == InflateResult::Status::ok && out.body.size() > max_bytes) {
    out.status = InflateResult::Status::too_large;
    out.error = "inflated body exceeds " + std::to_string(max_bytes) + " bytes";
  } else if (out.status == InflateResult::Status::ok && z.avail_in != 0) {
    out.status = InflateResult::Status::corrupt;
    out.error = "data after the end of the compressed stream";
  }
  inflateEnd(&z);
  if (out.status != InflateResult::Status::ok) out.body.clear();
  return out;
}

}  // namespace

std::optional<ContentCoding> content_coding(std::string_view header) {
  const std::string v = lower_trimmed(header);
  if (v.empty() || v == "identity") return ContentCoding::identity;
  if (v == "gzip" || v == "x-gzip") return ContentCoding::gzip;
  if (v == "deflate") return ContentCoding::deflate;
  return std::nullopt;
}

ContentCoding accepted_coding(std::string_view header) {
  bool gzip = false, deflate = false;
  size_t start = 0;
  while (start <= header.size()) {
    const size_t comma = std::min(header.find(',', start), header.size());
    std::string_view item = header.substr(start, comma - start);
    start = comma + 1;
    std::string_view params;
    if (const size_t semi = item.find(';'); semi != std::string_view::npos) {
      params = item.substr(semi + 1);
      item = item.substr(0, semi);
    }
    const std::string name = lower_trimmed(item);
    // q=0 (or 0.0, 0.000) refuses the coding; any other q accepts it.
    bool refused = false;
    const std::string p = lower_trimmed(params);
    if (p.rfind("q=", 0) == 0) {
      const std::string q = p.substr(2);
      refused = !q.empty() && q.find_first_not_of("0.") == std::string::npos;
    }
    if (refused) continue;
    if (name == "gzip" || name == "x-gzip") gzip = true;
    if (name == "deflate") deflate = true;
  }
  return gzip ? ContentCoding::gzip : deflate ? ContentCoding::deflate : ContentCoding::identity;
}

const char* coding_name(ContentCoding coding) {
  switch (coding) {
    case ContentCoding::gzip:
      return "gzip";
    case ContentCoding::deflate:
      return "deflate";
    default:
      return "identity";
  }
}

InflateResult inflate_body(std::string_view body, ContentCoding coding, uint64_t max_bytes) {
  if (coding == ContentCoding::identity) {
    InflateResult out;
    if (body.size() > max_bytes) {
      out.status = InflateResult::Status::too_large;
      out.error = "body exceeds " + std::to_string(max_bytes) + " bytes";
    } else {
      out.body = std::string(body);
    }
    return out;
  }
  if (body.empty()) return {};  // no body (a GET, say) with the header set: nothing to inflate
  if (coding == ContentCoding::gzip) return inflate_with(body, kGzipWindow, max_bytes);
  // "deflate" is the zlib format (RFC 9110), but some clients send raw deflate: a zlib stream
  // starts with a header whose 16-bit value is a multiple of 31 and names method 8.
  const bool zlib_header = body.size() >= 2 && (static_cast<unsigned char>(body[0]) & 0x0f) == 8 &&
                           ((static_cast<unsigned char>(body[0]) << 8) | static_cast<unsigned char>(body[1])) % 31 == 0;
  return inflate_with(body, zlib_header ? kZlibWindow : kRawWindow, max_bytes);
}

std::string deflate_body(std::string_view body, ContentCoding coding) {
  if (coding == ContentCoding::identity) return std::string(body);
  z_stream z{};
  // zlib's default level (6): replies are small JSON or tensors, where higher levels gain little.
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, coding == ContentCoding::gzip ? kGzipWindow : kZlibWindow,
                   8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("zlib: deflateInit2 failed");
  std::string out(deflateBound(&z, static_cast<uLong>(body.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  z.avail_in = static_cast<uInt>(body.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);  // deflateBound leaves room for all of it in one call
  out.resize(out.size() - z.avail_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("zlib: deflate failed (" + std::to_string(rc) + ")");
  return out;
}

}  // namespace convoy::serve
