// Encoded images on the server: a BYTES input (Triton's convention for image models: one JPEG or
// PNG per element, in Triton's binary tensor format) decoded and preprocessed by the model's
// instance, against a UINT8 request of the same pixels; an unreadable element is a 400 naming it,
// and the requests batched with it are still answered.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "datasets/dataset.h"
#include "datasets/image_codec.h"
#include "tests/serve/serve_fixture.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using convoy::testing::http;
using convoy::testing::ServerProcess;
using ServeEncodedE2E = convoy::testing::ServeTest;

// POSTs a binary-format infer request (the JSON header, then `binary`) to model fm.
convoy::testing::HttpResult post_binary(const ServerProcess& server, const fs::path& scratch, const json& header,
                                        const std::string& binary) {
  const std::string text = header.dump();
  const std::string all = text + binary;
  const fs::path file = scratch / "request.bin";
  convoy::testing::write_file(file, std::vector<uint8_t>(all.begin(), all.end()));
  return http("POST", server.url("/v2/models/fm/infer"),
              "--data-binary @" + file.string() + " -H 'Inference-Header-Content-Length: " +
                  std::to_string(text.size()) + "'",
              scratch);
}

// Triton's BYTES serialization: each element a 4-byte little-endian length, then its bytes.
std::string bytes_elements(const std::vector<std::vector<uint8_t>>& elements) {
  std::string out;
  for (const auto& e : elements) {
    const auto n = static_cast<uint32_t>(e.size());
    const char length[4] = {static_cast<char>(n & 0xff), static_cast<char>(n >> 8 & 0xff),
                            static_cast<char>(n >> 16 & 0xff), static_cast<char>(n >> 24 & 0xff)};
    out.append(length, 4);
    out.append(e.begin(), e.end());
  }
  return out;
}

// The probabilities of a binary-output reply, (n, 10).
std::vector<float> binary_probabilities(const convoy::testing::HttpResult& r) {
  const std::string name = "Inference-Header-Content-Length: ";
  const size_t at = r.headers.find(name);
  EXPECT_NE(at, std::string::npos) << r.headers;
  if (at == std::string::npos) return {};
  const size_t header = std::stoul(r.headers.substr(at + name.size()));
  std::vector<float> out((r.body.size() - header) / sizeof(float));
  std::memcpy(out.data(), r.body.data() + header, out.size() * sizeof(float));
  return out;
}

TEST_F(ServeEncodedE2E, BytesImagesAgreeWithTheirPixelsAndABadOneIsA400) {
  add_model("fm", 1, checkpoint_a_, "max_batch_size: 8\ndevice: cpu\n");
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  convoy::DatasetSpec spec;
  const auto test = convoy::load_dataset(spec, "test", 3);
  convoy::Preprocess p;  // 1 x 28 x 28, as stored
  std::vector<std::vector<uint8_t>> files;
  std::string pixels;
  for (int64_t i = 0; i < 3; ++i) {
    std::vector<uint8_t> image(784);
    test->load(i, p, convoy::SampleMode::eval, 0, image.data());
    pixels.append(image.begin(), image.end());
    // PNG: lossless, so the decoded pixels are the UINT8 request's exactly.
    files.push_back(convoy::encode_png(image.data(), 28, 28, 1));
  }
  const json outputs = {{{"name", "probabilities"}, {"parameters", {{"binary_data", true}}}}};
  const std::string encoded = bytes_elements(files);
  const json bytes_header = {{"inputs", {{{"name", "input"}, {"shape", {3}}, {"datatype", "BYTES"},
                                          {"parameters", {{"binary_data_size", encoded.size()}}}}}},
                             {"outputs", outputs}};
  const json u8_header = {{"inputs", {{{"name", "input"}, {"shape", {3, 1, 28, 28}}, {"datatype", "UINT8"},
                                       {"parameters", {{"binary_data_size", pixels.size()}}}}}},
                          {"outputs", outputs}};
  const auto from_bytes = post_binary(server, dir_.path(), bytes_header, encoded);
  const auto from_pixels = post_binary(server, dir_.path(), u8_header, pixels);
  ASSERT_EQ(from_bytes.status, 200) << from_bytes.body;
  ASSERT_EQ(from_pixels.status, 200) << from_pixels.body;
  const std::vector<float> a = binary_probabilities(from_bytes), b = binary_probabilities(from_pixels);
  ASSERT_EQ(a.size(), 30u);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6) << i;

  // The second element is not an image: a 400 that names it.
  files[1] = {'G', 'I', 'F', '8', '9', 'a', 0, 0};
  const std::string bad = bytes_elements(files);
  json bad_header = bytes_header;
  bad_header["inputs"][0]["parameters"]["binary_data_size"] = bad.size();
  const auto refused = post_binary(server, dir_.path(), bad_header, bad);
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_NE(refused.body.find("input element 1"), std::string::npos) << refused.body;
  // Too few elements for the shape: refused before it is queued.
  json short_header = bytes_header;
  short_header["inputs"][0]["shape"] = {4};
  const auto short_reply = post_binary(server, dir_.path(), short_header, encoded);
  EXPECT_EQ(short_reply.status, 400) << short_reply.body;
  EXPECT_NE(short_reply.body.find("3 BYTES elements for shape [4]"), std::string::npos) << short_reply.body;
}

}  // namespace
