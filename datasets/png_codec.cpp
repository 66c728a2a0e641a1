// PNG through libpng, with every library error turned into an InputError and nothing printed:
// libpng's longjmps never cross a C++ frame.
#include <png.h>

#include <csetjmp>
#include <cstring>
#include <string>
#include <vector>

#include "datasets/image_codec.h"
#include "datasets/image_codec_internal.h"
#include "engine/core/error.h"

namespace convoy {
namespace {

using codec::check_size;
using codec::fail;

// Where libpng's callbacks report to. Its error handler longjmps back into png_phase(),
// over libpng's own C frames only.
struct PngState {
  const uint8_t* data = nullptr;
  size_t size = 0, pos = 0;
  char message[200] = {};
  std::jmp_buf jump;
};

void png_on_error(png_structp png, png_const_charp message) {
  auto* st = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(st->message, sizeof st->message, "%s", message ? message : "unknown error");
  std::longjmp(st->jump, 1);
}

void png_on_warning(png_structp, png_const_charp) {}  // ancillary trouble: the pixels are fine

void png_on_read(png_structp png, png_bytep out, size_t length) {
  auto* st = static_cast<PngState*>(png_get_io_ptr(png));
  if (st->size - st->pos < length) png_error(png, "truncated file");
  std::memcpy(out, st->data + st->pos, length);
  st->pos += length;
}

// Runs `step` under setjmp; false (with st->message) when libpng reported an error. The
// frames between here and png_on_error are libpng's: no destructor is skipped.
template <class Step>
bool png_phase(PngState& st, Step step) {
  if (setjmp(st.jump)) return false;
  step();
  return true;
}

struct PngReader {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngReader() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

}  // namespace

DecodedImage decode_png(std::span<const uint8_t> bytes, std::string_view name) {
  read_image_header(bytes, name);  // the magic and the size limits, before libpng allocates
  PngState st;
  st.data = bytes.data();
  st.size = bytes.size();
  PngReader r;
  r.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &st, png_on_error, png_on_warning);
  if (r.png) r.info = png_create_info_struct(r.png);
  if (!r.png || !r.info) throw Error("libpng: cannot create a reader (out of memory)");
  png_set_read_fn(r.png, &st, png_on_read);

  int channels = 0;
  png_uint_32 width = 0, height = 0;
  const bool header_ok = png_phase(st, [&] {
    png_set_user_limits(r.png, kMaxImageSide, kMaxImageSide);
    png_read_info(r.png, r.info);
    const int color = png_get_color_type(r.png, r.info);
    const int depth = png_get_bit_depth(r.png, r.info);
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(r.png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(r.png);
    if (depth == 16) png_set_scale_16(r.png);  // rounds, where strip_16 would truncate
    // Always: a palette or colour with a tRNS chunk gains alpha on expansion, too.
    png_set_strip_alpha(r.png);
    png_set_interlace_handling(r.png);
    png_read_update_info(r.png, r.info);
    channels = png_get_channels(r.png, r.info);
    width = png_get_image_width(r.png, r.info);
    height = png_get_image_height(r.png, r.info);
  });
  if (!header_ok) fail(name, std::string("not a readable PNG (") + st.message + ")");
  if (channels != 1 && channels != 3)
    fail(name, "PNG decodes to " + std::to_string(channels) + " channels, expected 1 or 3");
  check_size(name, "PNG", width, height);

  DecodedImage img;
  img.width = width;
  img.height = height;
  img.channels = channels;
  img.pixels.resize(static_cast<size_t>(img.width * img.height * channels));
  std::vector<png_bytep> rows(height);
  for (png_uint_32 y = 0; y < height; ++y) rows[y] = img.pixels.data() + y * img.width * channels;
  png_bytepp row_ptrs = rows.data();
  if (!png_phase(st, [&] { png_read_image(r.png, row_ptrs); }))
    fail(name, std::string("corrupt or truncated PNG (") + st.message + ")");
  return img;
}

namespace {

std::vector<uint8_t> write_png(png_image& image, const void* pixels, const void* colormap) {
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&image, nullptr, &size, 0, pixels, 0, colormap))
    throw Error(std::string("libpng: cannot encode: ") + image.message);
  std::vector<uint8_t> out(size);
  if (!png_image_write_to_memory(&image, out.data(), &size, 0, pixels, 0, colormap))
    throw Error(std::string("libpng: cannot encode: ") + image.message);
  out.resize(size);
  return out;
}

}  // namespace

std::vector<uint8_t> encode_png(const void* pixels, int64_t width, int64_t height, int64_t channels,
                                int bit_depth) {
  CONVOY_CHECK(channels >= 1 && channels <= 4, "encode_png: channels must be 1 to 4");
  CONVOY_CHECK(bit_depth == 8 || bit_depth == 16, "encode_png: bit depth must be 8 or 16");
  static constexpr png_uint_32 kFormats[4] = {PNG_FORMAT_GRAY, PNG_FORMAT_GA, PNG_FORMAT_RGB, PNG_FORMAT_RGBA};
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  // LINEAR is the simplified API's only 16-bit format; it adds a gAMA chunk, which readers
  // that ignore gamma (ours, PIL, OpenCV) pass over.
  image.format = kFormats[channels - 1] | (bit_depth == 16 ? PNG_FORMAT_FLAG_LINEAR : 0);
  return write_png(image, pixels, nullptr);
}

std::vector<uint8_t> encode_png_palette(const uint8_t* indices, int64_t width, int64_t height,
                                        std::span<const uint8_t> palette_rgb) {
  CONVOY_CHECK(palette_rgb.size() % 3 == 0 && palette_rgb.size() >= 3 && palette_rgb.size() <= 768,
               "encode_png_palette: 1 to 256 RGB entries");
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = PNG_FORMAT_RGB_COLORMAP;
  image.colormap_entries = static_cast<png_uint_32>(palette_rgb.size() / 3);
  return write_png(image, indices, palette_rgb.data());
}

}  // namespace convoy
