#pragma once
// JPEG (TurboJPEG) and PNG (libpng) files to and from 8-bit interleaved pixels, in memory.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace convoy {

enum class ImageFormat { unknown, jpeg, png };

// The format by its magic bytes (FF D8 FF; 89 'PNG' 0D 0A 1A 0A), never by the file's name.
ImageFormat image_format_of(std::span<const uint8_t> bytes);

// What the header says, read without decoding any pixels.
struct ImageHeader {
  ImageFormat format = ImageFormat::unknown;
  int64_t width = 0, height = 0;
};

// The format and size; an InputError naming `name` for anything but a readable JPEG or PNG
// header, and for an image over kMaxImageSide per side or kMaxImagePixels in all.
ImageHeader read_image_header(std::span<const uint8_t> bytes, std::string_view name);

// Refused before allocating: a corrupt header must not be able to ask for gigabytes.
constexpr int64_t kMaxImageSide = 65535;
constexpr int64_t kMaxImagePixels = int64_t{1} << 28;

struct DecodedImage {
  std::vector<uint8_t> pixels;  // (height, width, channels) u8
  int64_t width = 0, height = 0;
  int64_t channels = 0;  // 1 (gray) or 3 (RGB); alpha is dropped, 16-bit reduced to 8
  // Decoded size / stored size: below 1 when a JPEG was decoded at a DCT scale, else 1.
  double scale = 1.0;
};

// Permission for a JPEG to be decoded smaller: a region of box_width x box_height stored
// pixels must still cover at least min_width x min_height decoded pixels.
struct ScaleHint {
  double box_width = 0, box_height = 0;
  int64_t min_width = 0, min_height = 0;
};

// JPEG through TurboJPEG, at the smallest DCT scale of 1/8, 1/4, 1/2 and 1 that `hint` allows
// (full size without one; TurboJPEG's other scales, 3/8 to 7/8, decode slower than 1). Gray JPEGs decode to 1 channel, colour ones to 3 (CMYK inverted
// as Adobe writes it). Warnings (a truncated file, corrupt data) are errors: an InputError
// naming `name`.
DecodedImage decode_jpeg(std::span<const uint8_t> bytes, std::string_view name, const ScaleHint* hint = nullptr);
// A JPEG decoded only where a crop needs it, at a DCT scale as decode_jpeg picks it.
struct JpegRegion {
  // The decoded rectangle, in pixels of the (scaled) full image: columns [x, x + width) and
  // rows [y, y + height). It holds the asked window and may be wider (libjpeg crops columns
  // at iMCU boundaries).
  int64_t x = 0, y = 0, width = 0, height = 0;
  int64_t full_width = 0, full_height = 0;  // the scaled image
  double scale = 1.0;                       // decoded size / stored size
  int64_t channels = 0;     // 1 (gray) or 3 (colour)
  int64_t pixel_bytes = 0;  // 1 (gray) or 4 (colour as RGBX, the fourth byte undefined)
  int64_t stride = 0;       // bytes between rows
  // Thread-local storage of the decoder: valid until this thread's next call.
  const uint8_t* pixels = nullptr;
};

// The stored-pixel window [x, x + width) x [y, y + height) of a JPEG, plus `margin` decoded
// pixels on every side (clamped to the image), decoded through libjpeg's cropped decoding:
// jpeg_crop_scanline for the columns (the entropy decoding still runs over whole rows, the
// IDCT and colour conversion only over the window), jpeg_skip_scanlines above the window,
// and no decoding at all below it. Warnings are errors, as in decode_jpeg; a file whose
// undecoded rest holds no end-of-image marker is refused as truncated.
JpegRegion decode_jpeg_region(std::span<const uint8_t> bytes, std::string_view name, const ScaleHint* hint,
                              double x, double y, double width, double height, int64_t margin);

// PNG through libpng: 1, 2, 4, 8 and 16 bits, gray, gray+alpha, RGB, RGBA and palette; to 1
// channel (gray sources) or 3. Gamma chunks are ignored (as PIL and OpenCV do).
DecodedImage decode_png(std::span<const uint8_t> bytes, std::string_view name);
// Either one, chosen by the magic bytes; anything else is "not a JPEG or PNG image".
DecodedImage decode_image(std::span<const uint8_t> bytes, std::string_view name,
                                const ScaleHint* hint = nullptr);

// Encoders for test fixtures and tools. pixels: (height, width, channels) u8, channels 1 or 3;
// colour with the chroma subsampling asked (cameras write 4:2:0 or 4:2:2, editors often 4:4:4).
enum class ChromaSubsampling { s420, s422, s444 };
std::vector<uint8_t> encode_jpeg(const uint8_t* pixels, int64_t width, int64_t height, int64_t channels,
                                 int quality, ChromaSubsampling chroma = ChromaSubsampling::s420);
// channels 1 to 4 (gray, gray+alpha, RGB, RGBA); bit_depth 8 (`pixels` is u8) or 16
// (`pixels` is native-endian u16).
std::vector<uint8_t> encode_png(const void* pixels, int64_t width, int64_t height, int64_t channels,
                                int bit_depth = 8);
// A palette PNG: one index per pixel into `palette_rgb` (entries x 3 u8, at most 256 entries).
std::vector<uint8_t> encode_png_palette(const uint8_t* indices, int64_t width, int64_t height,
                                        std::span<const uint8_t> palette_rgb);

}  // namespace convoy
