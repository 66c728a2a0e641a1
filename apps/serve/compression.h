#pragma once
// HTTP content codings as Triton's HTTP endpoint takes and gives them: a request body sent with
// Content-Encoding gzip or deflate is inflated before it is parsed, and a reply is deflated when
// the request's Accept-Encoding names gzip or deflate. zlib does the work (Debian's zlib1g-dev).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace convoy::serve {

enum class ContentCoding { identity, gzip, deflate };

// The coding a Content-Encoding header names ("" and "identity" are identity); nullopt for one
// we cannot undo (br, compress, a list of several).
std::optional<ContentCoding> content_coding(std::string_view header);

// The coding to answer with for an Accept-Encoding header: gzip or deflate when it names one
// with a non-zero q (gzip first), else identity.
ContentCoding accepted_coding(std::string_view header);

// The header value of a coding: "gzip", "deflate", "identity".
const char* coding_name(ContentCoding coding);

// Why a body could not be inflated: too_large when its inflated size would pass the bound.
struct InflateResult {
  enum class Status { ok, corrupt, too_large } status = Status::ok;
  std::string body;
  std::string error;  // for corrupt: zlib's reason
};

// Inflates `body` (gzip: RFC 1952; deflate: the zlib format of RFC 1950, or raw deflate as some
// clients send it), never holding more than `max_bytes` of output.
InflateResult inflate_body(std::string_view body, ContentCoding coding, uint64_t max_bytes);

// Deflates `body` with `coding` (gzip or deflate; identity returns it as it is).
std::string deflate_body(std::string_view body, ContentCoding coding);

}  // namespace convoy::serve
