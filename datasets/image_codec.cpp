// JPEG through TurboJPEG and libjpeg (PNG: png_codec.cpp), with every library error turned
// into an InputError and nothing printed: libjpeg's longjmps never cross a C++ frame.
#include "datasets/image_codec.h"

#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

// After <cstdio>: jpeglib.h uses FILE and size_t without including their headers.
#include <jpeglib.h>

#include "datasets/image_codec_internal.h"
#include "engine/core/error.h"

namespace convoy {
namespace {

using codec::big_endian_u32;
using codec::check_size;
using codec::fail;

// --- JPEG -------------------------------------------------------------------------------------

// One TurboJPEG handle per thread and direction: creating one costs an allocation and the
// library's setup, per image otherwise.
struct TjHandle {
  tjhandle handle = nullptr;
  ~TjHandle() {
    if (handle) tjDestroy(handle);
  }
};

TjHandle& tj_slot(bool compress) {
  thread_local TjHandle decompressor, compressor;
  return compress ? compressor : decompressor;
}

tjhandle tj_handle(bool compress) {
  TjHandle& h = tj_slot(compress);
  if (!h.handle) h.handle = compress ? tjInitCompress() : tjInitDecompress();
  if (!h.handle) throw Error(std::string("libjpeg-turbo: cannot initialize: ") + tjGetErrorStr2(nullptr));
  return h.handle;
}

// The message of a failed call, and the handle dropped: TurboJPEG 2.1 leaves a handle whose
// header read failed mid-marker in that state, and the next file then fails with "Bogus
// marker length".
std::string tj_failure(bool compress) {
  TjHandle& h = tj_slot(compress);
  std::string message = tjGetErrorStr2(h.handle);
  tjDestroy(h.handle);
  h.handle = nullptr;
  return message;
}

struct JpegHeader {
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
};

JpegHeader jpeg_header(tjhandle tj, std::span<const uint8_t> bytes, std::string_view name) {
  JpegHeader h;
  if (bytes.size() > 0xFFFFFFFFu) fail(name, "JPEG file too large");
  if (tjDecompressHeader3(tj, bytes.data(), static_cast<unsigned long>(bytes.size()), &h.width, &h.height,
                          &h.subsampling, &h.colorspace) != 0)
    fail(name, "not a readable JPEG (" + tj_failure(false) + ")");
  check_size(name, "JPEG", h.width, h.height);
  return h;
}

// The smallest DCT scale, at most 1, at which the hinted box still covers the minimum size.
// Only 1/2, 1/4 and 1/8: libjpeg-turbo 2.1 has SIMD code for those reduced IDCTs, and its
// generic 3/8, 5/8, 3/4 and 7/8 ones decode slower than the full image (measured on a 500x375
// photo: full 0.43 ms, 1/2 0.23 ms, 3/8 0.44 ms, 3/4 1.2 ms, 7/8 1.8 ms).
tjscalingfactor jpeg_scale(const ScaleHint* hint) {
  tjscalingfactor best{1, 1};
  if (!hint || hint->min_width < 1 || hint->min_height < 1) return best;
  int count = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&count);
  if (!factors) return best;
  double best_value = 1.0;
  for (int i = 0; i < count; ++i) {
    const double f = static_cast<double>(factors[i].num) / factors[i].denom;
    if (factors[i].num != 1 || f > 1.0 || f >= best_value) continue;
    if (hint->box_width * f >= static_cast<double>(hint->min_width) &&
        hint->box_height * f >= static_cast<double>(hint->min_height)) {
      best = factors[i];
      best_value = f;
    }
  }
  return best;
}

// --- JPEG through the libjpeg API (cropped decoding) --------------------------------------

// One decompressor per thread, reused image after image. libjpeg's error_exit and warnings
// (emit_message at level -1) longjmp back into jpeg_phase(), over libjpeg's own C frames only.
struct JpegDecoder {
  jpeg_decompress_struct cinfo;
  jpeg_error_mgr err;
  jpeg_progress_mgr progress;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {};
  bool created = false;
  ~JpegDecoder() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

JpegDecoder* decoder_of(j_common_ptr cinfo) { return static_cast<JpegDecoder*>(cinfo->client_data); }

[[noreturn]] void jpeg_on_error(j_common_ptr cinfo) {
  JpegDecoder* d = decoder_of(cinfo);
  (*cinfo->err->format_message)(cinfo, d->message);
  std::longjmp(d->jump, 1);
}

void jpeg_on_message(j_common_ptr cinfo, int level) {
  if (level < 0) jpeg_on_error(cinfo);  // a warning (truncated, corrupt data): an error here
}

// TurboJPEG's TJFLAG_LIMITSCANS: a crafted progressive file cannot spin for minutes.
void jpeg_on_progress(j_common_ptr cinfo) {
  auto* dinfo = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (dinfo->progressive_mode && dinfo->input_scan_number > 500) {
    std::snprintf(decoder_of(cinfo)->message, JMSG_LENGTH_MAX, "progressive JPEG with more than 500 scans");
    std::longjmp(decoder_of(cinfo)->jump, 1);
  }
}

JpegDecoder& jpeg_decoder() {
  thread_local JpegDecoder d;
  if (!d.created) {
    d.cinfo.err = jpeg_std_error(&d.err);
    d.err.error_exit = jpeg_on_error;
    d.err.emit_message = jpeg_on_message;
    d.cinfo.client_data = &d;  // kept by jpeg_create_decompress, as err is
    if (setjmp(d.jump)) throw Error(std::string("libjpeg: cannot create a decompressor: ") + d.message);
    jpeg_create_decompress(&d.cinfo);
    d.progress.progress_monitor = jpeg_on_progress;
    d.cinfo.progress = &d.progress;
    d.created = true;
  }
  return d;
}

// Runs `step` under setjmp: false (with d.message) when libjpeg reported an error or a
// warning, and the decompressor is then dropped, to be created afresh. `step` must hold
// nothing with a destructor.
template <class Step>
bool jpeg_phase(JpegDecoder& d, Step step) {
  if (setjmp(d.jump)) {
    jpeg_destroy_decompress(&d.cinfo);
    d.created = false;
    return false;
  }
  step();
  return true;
}

// Whether bytes [from, end) hold an end-of-image marker. In entropy-coded data every FF byte
// is followed by 00 or a restart marker, so FF D9 there is the real end of the image.
bool has_eoi(const uint8_t* from, const uint8_t* end) {
  while (from + 1 < end) {
    const void* ff = std::memchr(from, 0xFF, static_cast<size_t>(end - from - 1));
    if (!ff) return false;
    const auto* p = static_cast<const uint8_t*>(ff);
    if (p[1] == 0xD9) return true;
    from = p + 1;
  }
  return false;
}

// --- channels ---------------------------------------------------------------------------------

void cmyk_to_rgb(const uint8_t* cmyk, int64_t pixels, uint8_t* rgb) {
  // Adobe's CMYK JPEGs store inverted samples (libjpeg passes them through): R = C * K / 255.
  for (int64_t i = 0; i < pixels; ++i) {
    const int k = cmyk[4 * i + 3];
    for (int c = 0; c < 3; ++c) rgb[3 * i + c] = static_cast<uint8_t>((cmyk[4 * i + c] * k + 127) / 255);
  }
}

}  // namespace

ImageFormat image_format_of(std::span<const uint8_t> bytes) {
  static constexpr uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) return ImageFormat::jpeg;
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPng, 8) == 0) return ImageFormat::png;
  return ImageFormat::unknown;
}

ImageHeader read_image_header(std::span<const uint8_t> bytes, std::string_view name) {
  ImageHeader h;
  h.format = image_format_of(bytes);
  switch (h.format) {
    case ImageFormat::jpeg: {
      const JpegHeader j = jpeg_header(tj_handle(false), bytes, name);
      h.width = j.width;
      h.height = j.height;
      return h;
    }
    case ImageFormat::png:
      // The first chunk must be IHDR: length 13, then width and height big-endian.
      if (bytes.size() < 33 || std::memcmp(bytes.data() + 12, "IHDR", 4) != 0)
        fail(name, "not a readable PNG (truncated or corrupt header)");
      h.width = big_endian_u32(bytes.data() + 16);
      h.height = big_endian_u32(bytes.data() + 20);
      check_size(name, "PNG", h.width, h.height);
      return h;
    case ImageFormat::unknown:
      break;
  }
  if (bytes.empty()) fail(name, "empty file, expected a JPEG or PNG image");
  fail(name, "not a JPEG or PNG image (unrecognized file signature)");
}

DecodedImage decode_jpeg(std::span<const uint8_t> bytes, std::string_view name, const ScaleHint* hint) {
  tjhandle tj = tj_handle(false);
  const JpegHeader h = jpeg_header(tj, bytes, name);
  const tjscalingfactor sf = jpeg_scale(hint);
  DecodedImage img;
  img.width = TJSCALED(h.width, sf);
  img.height = TJSCALED(h.height, sf);
  img.scale = static_cast<double>(sf.num) / sf.denom;
  const bool gray = h.colorspace == TJCS_GRAY;
  const bool cmyk = h.colorspace == TJCS_CMYK || h.colorspace == TJCS_YCCK;
  img.channels = gray ? 1 : 3;
  const int pixel_format = gray ? TJPF_GRAY : cmyk ? TJPF_CMYK : TJPF_RGB;
  const int64_t decoded_channels = cmyk ? 4 : img.channels;
  std::vector<uint8_t> decoded(static_cast<size_t>(img.width * img.height * decoded_channels));
  // STOPONWARNING: a truncated or damaged file is refused, not returned half grey.
  // LIMITSCANS: a crafted progressive JPEG cannot spin for minutes.
  if (tjDecompress2(tj, bytes.data(), static_cast<unsigned long>(bytes.size()), decoded.data(),
                    static_cast<int>(img.width), 0, static_cast<int>(img.height), pixel_format,
                    TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS) != 0)
    fail(name, "corrupt or truncated JPEG (" + tj_failure(false) + ")");
  if (cmyk) {
    img.pixels.resize(static_cast<size_t>(img.width * img.height * 3));
    cmyk_to_rgb(decoded.data(), img.width * img.height, img.pixels.data());
  } else {
    img.pixels = std::move(decoded);
  }
  return img;
}

JpegRegion decode_jpeg_region(std::span<const uint8_t> bytes, std::string_view name, const ScaleHint* hint,
                              double x, double y, double width, double height, int64_t margin) {
  if (bytes.size() > 0xFFFFFFFFu) fail(name, "JPEG file too large");
  JpegDecoder& d = jpeg_decoder();
  j_decompress_ptr cinfo = &d.cinfo;
  const tjscalingfactor sf = jpeg_scale(hint);
  if (!jpeg_phase(d, [&] {
        jpeg_mem_src(cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
        jpeg_read_header(cinfo, TRUE);
      }))
    fail(name, std::string("not a readable JPEG (") + d.message + ")");
  if (cinfo->image_width < 1 || cinfo->image_height < 1 || cinfo->image_width > kMaxImageSide ||
      cinfo->image_height > kMaxImageSide ||
      int64_t{cinfo->image_width} * cinfo->image_height > kMaxImagePixels) {
    const int64_t w = cinfo->image_width, h = cinfo->image_height;
    jpeg_abort_decompress(cinfo);
    check_size(name, "JPEG", w, h);
  }
  const J_COLOR_SPACE in_space = cinfo->jpeg_color_space;
  const bool gray = in_space == JCS_GRAYSCALE;
  const bool cmyk = in_space == JCS_CMYK || in_space == JCS_YCCK;
  JpegRegion r;
  r.channels = gray ? 1 : 3;
  r.pixel_bytes = gray ? 1 : 4;
  r.scale = static_cast<double>(sf.num) / sf.denom;
  JDIMENSION x0 = 0, cols = 0;
  int64_t y0 = 0, y1 = 0, trim_left = 0, trim_right = 0;
  if (!jpeg_phase(d, [&] {
        cinfo->out_color_space = gray ? JCS_GRAYSCALE : cmyk ? JCS_CMYK : JCS_EXT_RGBX;
        cinfo->scale_num = static_cast<unsigned int>(sf.num);
        cinfo->scale_denom = static_cast<unsigned int>(sf.denom);
        jpeg_start_decompress(cinfo);
        const int64_t fw = cinfo->output_width, fh = cinfo->output_height;
        const int64_t wx0 = std::clamp<int64_t>(static_cast<int64_t>(std::floor(x * r.scale)) - margin, 0, fw - 1);
        const int64_t wx1 = std::clamp<int64_t>(static_cast<int64_t>(std::ceil((x + width) * r.scale)) + margin, wx0 + 1, fw);
        y0 = std::clamp<int64_t>(static_cast<int64_t>(std::floor(y * r.scale)) - margin, 0, fh - 1);
        y1 = std::clamp<int64_t>(static_cast<int64_t>(std::ceil((y + height) * r.scale)) + margin, y0 + 1, fh);
        // Colour: libjpeg's fancy chroma upsampling treats the crop's edges as the image's, so
        // the outermost columns of an inner edge differ from a full decode; two more columns
        // each side are decoded and dropped below.
        const int64_t extra = gray ? 0 : 2;
        x0 = static_cast<JDIMENSION>(std::max<int64_t>(wx0 - extra, 0));
        cols = static_cast<JDIMENSION>(std::min<int64_t>(wx1 + extra, fw) - x0);
        if (cols < cinfo->output_width) jpeg_crop_scanline(cinfo, &x0, &cols);
        trim_left = x0 > 0 ? std::min<int64_t>(extra, wx0 - x0) : 0;
        trim_right = x0 + cols < fw ? std::min<int64_t>(extra, x0 + cols - wx1) : 0;
        r.full_width = fw;
        r.full_height = fh;
      }))
    fail(name, std::string("corrupt or truncated JPEG (") + d.message + ")");
  r.x = x0;
  r.y = y0;
  r.width = cols;
  r.height = y1 - y0;
  r.stride = r.width * (cmyk ? 4 : r.pixel_bytes);
  thread_local std::vector<uint8_t> store;
  const size_t need = static_cast<size_t>(r.stride * r.height);
  if (store.size() < need) {
    try {
      store.resize(need);
    } catch (...) {
      jpeg_abort_decompress(cinfo);
      throw;
    }
  }
  uint8_t* out = store.data();
  const int64_t stride = r.stride, rows = r.height;
  bool complete = false;
  if (!jpeg_phase(d, [&] {
        if (y0 > 0) jpeg_skip_scanlines(cinfo, static_cast<JDIMENSION>(y0));
        JSAMPROW row_ptrs[16];
        int64_t done = 0;
        while (done < rows) {
          const int64_t n = std::min<int64_t>(16, rows - done);
          for (int64_t i = 0; i < n; ++i) row_ptrs[i] = out + (done + i) * stride;
          done += jpeg_read_scanlines(cinfo, row_ptrs, static_cast<JDIMENSION>(n));
        }
        if (cinfo->output_scanline >= cinfo->output_height) {
          jpeg_finish_decompress(cinfo);  // reads on to the end-of-image marker
          complete = true;
        }
      }))
    fail(name, std::string("corrupt or truncated JPEG (") + d.message + ")");
  if (!complete) {
    // The rows below the window are never decoded; the file must still end.
    // The marker may be read already: by the input side, which runs ahead of the output, or
    // by the entropy decoder, which stops at a marker and keeps it in unread_marker.
    const bool ended = jpeg_input_complete(cinfo) || cinfo->unread_marker == 0xD9 ||
                       has_eoi(cinfo->src->next_input_byte, bytes.data() + bytes.size());
    jpeg_abort_decompress(cinfo);
    if (!ended)
      fail(name, "corrupt or truncated JPEG (no end-of-image marker)");
  }
  if (cmyk) {
    for (int64_t yy = 0; yy < r.height; ++yy) {
      uint8_t* p = out + yy * stride;
      for (int64_t i = 0; i < r.width; ++i) {
        const int k = p[4 * i + 3];
        for (int c = 0; c < 3; ++c) p[4 * i + c] = static_cast<uint8_t>((p[4 * i + c] * k + 127) / 255);
      }
    }
  }
  r.pixels = out + trim_left * r.pixel_bytes;
  r.x += trim_left;
  r.width -= trim_left + trim_right;
  return r;
}

DecodedImage decode_image(std::span<const uint8_t> bytes, std::string_view name, const ScaleHint* hint) {
  switch (image_format_of(bytes)) {
    case ImageFormat::jpeg: return decode_jpeg(bytes, name, hint);
    case ImageFormat::png: return decode_png(bytes, name);
    case ImageFormat::unknown: break;
  }
  read_image_header(bytes, name);  // throws the "not a JPEG or PNG" error
  fail(name, "not a JPEG or PNG image");
}

std::vector<uint8_t> encode_jpeg(const uint8_t* pixels, int64_t width, int64_t height, int64_t channels,
                                 int quality, ChromaSubsampling chroma) {
  CONVOY_CHECK(channels == 1 || channels == 3, "encode_jpeg: channels must be 1 or 3");
  int samp = TJSAMP_GRAY;
  if (channels == 3) {
    switch (chroma) {
      case ChromaSubsampling::s420: samp = TJSAMP_420; break;
      case ChromaSubsampling::s422: samp = TJSAMP_422; break;
      case ChromaSubsampling::s444: samp = TJSAMP_444; break;
    }
  }
  tjhandle tj = tj_handle(true);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(tj, pixels, static_cast<int>(width), 0, static_cast<int>(height),
                             channels == 1 ? TJPF_GRAY : TJPF_RGB, &buffer, &size,
                             samp, quality, 0);
  std::unique_ptr<unsigned char, void (*)(unsigned char*)> owned(buffer, tjFree);
  if (rc != 0) throw Error("libjpeg-turbo: cannot encode: " + tj_failure(true));
  return std::vector<uint8_t>(buffer, buffer + size);
}

}  // namespace convoy
