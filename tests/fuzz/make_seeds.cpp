// Writes the binary seed files of tests/fuzz/corpus/ with Convoy's own writers and encoders:
// a few valid files of each format and a few near-valid ones (truncated, a byte changed).
// Run by scripts/fuzz.sh --seeds (built with the fuzz targets); its output is committed.
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "datasets/image_codec.h"
#include "engine/checkpoint/safetensors.h"

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

static void put(const fs::path& file, const Bytes& b) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size());
}
static Bytes get(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}
static Bytes cut(Bytes b, size_t n) { b.resize(std::min(n, b.size())); return b; }
static Bytes flip(Bytes b, size_t at) { if (at < b.size()) b[at] ^= 0x5A; return b; }
static Bytes gzip(const Bytes& raw) {
  Bytes out(compressBound(raw.size()) + 64);
  z_stream zs{};
  deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  zs.next_in = const_cast<uint8_t*>(raw.data());
  zs.avail_in = static_cast<uInt>(raw.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const fs::path root = argv[1];

  // safetensors
  {
    const fs::path d = root / "safetensors";
    fs::create_directories(d);
    using convoy::NamedTensor, convoy::Tensor, convoy::DType;
    std::vector<NamedTensor> ts;
    ts.push_back({"conv.weight", Tensor::from_floats({1, -2, 3.5f, 0, 1e-3f, 7}, {2, 1, 3, 1})});
    ts.push_back({"fc.bias", Tensor::from_floats({0.5f, -0.5f}, {2})});
    ts.push_back({"step", Tensor::from_ints({12}, {1})});
    ts.push_back({"empty", Tensor::empty({0, 3})});
    convoy::write_safetensors(d / "valid.safetensors", ts, {{"epoch", "3"}, {"model", "name: x"}});
    std::vector<NamedTensor> one{{"w", Tensor::zeros({2, 2}, DType::bf16)}};
    convoy::write_safetensors(d / "bf16.safetensors", one);
    std::vector<NamedTensor> u8{{"img", Tensor::zeros({1, 2, 2}, DType::u8)}};
    convoy::write_safetensors(d / "u8.safetensors", u8, {{"k", "v"}});
    convoy::write_safetensors(d / "no_tensors.safetensors", {}, {{"only", "metadata"}});
    const Bytes v = get(d / "valid.safetensors");
    put(d / "truncated.safetensors", cut(v, v.size() - 3));
    put(d / "header_cut.safetensors", cut(v, 40));
    put(d / "flipped.safetensors", flip(v, 30));
  }
  // IDX: images (N, H, W) and labels (N), raw and gzip
  {
    const fs::path d = root / "idx";
    Bytes images{0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 3};
    for (int i = 0; i < 18; ++i) images.push_back(static_cast<uint8_t>(i * 13));
    const Bytes labels{0, 0, 8, 1, 0, 0, 0, 4, 1, 9, 0, 3};
    put(d / "images.idx", images);
    put(d / "labels.idx", labels);
    put(d / "images.idx.gz", gzip(images));
    Bytes two = gzip(labels), second = gzip(labels);
    two.insert(two.end(), second.begin(), second.end());
    put(d / "two_members.idx.gz", two);  // `cat a.gz b.gz`: a trailing-data case
    put(d / "truncated.idx", cut(images, 20));
    put(d / "truncated.idx.gz", cut(gzip(images), 20));
    put(d / "float32.idx", {0, 0, 0x0D, 1, 0, 0, 0, 1, 0, 0, 0x80, 0x3F});
  }
  // images: PNG (gray, RGB, 16-bit RGBA, palette) and JPEG (gray, colour), and broken ones
  {
    const fs::path d = root / "image";
    std::vector<uint8_t> px(17 * 9 * 4);
    for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * 37) ^ (i >> 3));
    std::vector<uint16_t> px16(6 * 5 * 4);
    for (size_t i = 0; i < px16.size(); ++i) px16[i] = static_cast<uint16_t>(i * 2117);
    put(d / "gray.png", convoy::encode_png(px.data(), 8, 8, 1));
    put(d / "rgb.png", convoy::encode_png(px.data(), 17, 9, 3));
    put(d / "gray_alpha.png", convoy::encode_png(px.data(), 5, 3, 2));
    put(d / "rgba16.png", convoy::encode_png(px16.data(), 6, 5, 4, 16));
    const uint8_t palette[] = {0, 0, 0, 255, 0, 0, 0, 255, 0, 9, 9, 200};
    std::vector<uint8_t> idx(7 * 4);
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<uint8_t>(i % 4);
    put(d / "palette.png", convoy::encode_png_palette(idx.data(), 7, 4, palette));
    put(d / "gray.jpg", convoy::encode_jpeg(px.data(), 16, 16, 1, 90));
    const Bytes jpg = convoy::encode_jpeg(px.data(), 17, 9, 3, 75);
    put(d / "rgb.jpg", jpg);
    put(d / "truncated.jpg", cut(jpg, jpg.size() / 2));
    const Bytes png = convoy::encode_png(px.data(), 17, 9, 3);
    put(d / "bad_crc.png", flip(png, 40));
    put(d / "truncated.png", cut(png, png.size() - 20));
  }
  return 0;
}
