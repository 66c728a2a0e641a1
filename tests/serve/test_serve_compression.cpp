// HTTP content codings on a real server: a request body compressed with gzip or deflate (by gzip
// and Python's zlib, not by the server's own code) gets the same answer as the plain body, binary
// tensor requests included; Accept-Encoding gets a compressed reply that inflates to the plain one;
// a small gzip bomb over the body limit is a 413, a corrupt body a 400 naming the coding.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "apps/serve/compression.h"
#include "tests/serve/serve_fixture.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using convoy::testing::http;
using convoy::testing::read_text;
using convoy::testing::run_command;
using convoy::testing::ServerProcess;
using ServeCompressionE2E = convoy::testing::ServeTest;

std::vector<int> test_pixels() {
  std::vector<int> p(784);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<int>((i * 53) % 256);
  return p;
}

// Python's zlib on `in`: "zlib" (RFC 1950), "raw" (raw deflate) to compress, "inflate" to undo zlib.
bool python_zlib(const std::string& mode, const fs::path& in, const fs::path& out) {
  const std::string code =
      "import sys, zlib; d = open(sys.argv[2], 'rb').read(); m = sys.argv[1]\n"
      "if m == 'zlib': r = zlib.compress(d)\n"
      "elif m == 'raw': c = zlib.compressobj(wbits=-15); r = c.compress(d) + c.flush()\n"
      "else: r = zlib.decompress(d)\n"
      "open(sys.argv[3], 'wb').write(r)\n";
  return run_command("/usr/bin/python3 -c \"" + code + "\" " + mode + " " + in.string() + " " + out.string() + " 2>&1")
             .status == 0;
}

bool has_header(const std::string& headers, const std::string& line) {
  std::string lower = headers;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.find(line) != std::string::npos;
}

using convoy::serve::accepted_coding;
using convoy::serve::ContentCoding;
using convoy::serve::InflateResult;

TEST(ServeCompression, AcceptEncodingIsParsedWithItsWeights) {
  EXPECT_EQ(accepted_coding(""), ContentCoding::identity);
  EXPECT_EQ(accepted_coding("gzip"), ContentCoding::gzip);
  EXPECT_EQ(accepted_coding("deflate, gzip"), ContentCoding::gzip);
  EXPECT_EQ(accepted_coding(" Deflate ;q=0.5, br"), ContentCoding::deflate);
  EXPECT_EQ(accepted_coding("gzip;q=0, deflate;q=0.0"), ContentCoding::identity);
  EXPECT_EQ(accepted_coding("gzip;q=0.001"), ContentCoding::gzip);
  EXPECT_EQ(accepted_coding("br, identity"), ContentCoding::identity);
  EXPECT_EQ(convoy::serve::content_coding("GZIP"), ContentCoding::gzip);
  EXPECT_EQ(convoy::serve::content_coding(""), ContentCoding::identity);
  EXPECT_FALSE(convoy::serve::content_coding("gzip, deflate").has_value());
}

// The bound holds while inflating: the output never grows far past it, whatever the ratio.
TEST(ServeCompression, InflatingStopsAtTheBound) {
  const std::string zeros(10'000'000, '\0');
  for (ContentCoding c : {ContentCoding::gzip, ContentCoding::deflate}) {
    const std::string packed = convoy::serve::deflate_body(zeros, c);
    ASSERT_LT(packed.size(), 100'000u);
    const InflateResult all = convoy::serve::inflate_body(packed, c, zeros.size());
    ASSERT_EQ(all.status, InflateResult::Status::ok) << all.error;
    EXPECT_EQ(all.body, zeros);
    const InflateResult bounded = convoy::serve::inflate_body(packed, c, zeros.size() - 1);
    EXPECT_EQ(bounded.status, InflateResult::Status::too_large);
    EXPECT_TRUE(bounded.body.empty());
    EXPECT_EQ(convoy::serve::inflate_body(packed.substr(0, packed.size() / 2), c, zeros.size()).status,
              InflateResult::Status::corrupt);
    EXPECT_EQ(convoy::serve::inflate_body("", c, 10).status, InflateResult::Status::ok);
  }
}

TEST_F(ServeCompressionE2E, CompressedBodiesGetThePlainAnswer) {
  add_model("fm", 1, checkpoint_a_, "max_batch_size: 4\n");
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  const std::string url = server.url("/v2/models/fm/infer");
  const json request = {{"inputs", {{{"name", "input"}, {"shape", {1, 1, 28, 28}}, {"datatype", "UINT8"},
                                     {"data", test_pixels()}}}}};
  const fs::path plain = dir_ / "request.json";
  convoy::testing::write_text_file(plain, request.dump());
  const auto want = http("POST", url, "--data-binary @" + plain.string(), dir_.path());
  ASSERT_EQ(want.status, 200) << want.body;
  const json want_outputs = json::parse(want.body).at("outputs");
  ASSERT_EQ(want_outputs.size(), 2u);

  ASSERT_EQ(run_command("gzip -c " + plain.string() + " > " + (dir_ / "request.gz").string()).status, 0);
  ASSERT_TRUE(python_zlib("zlib", plain, dir_ / "request.zlib"));
  ASSERT_TRUE(python_zlib("raw", plain, dir_ / "request.raw"));
  for (const auto& [file, coding] : std::vector<std::pair<std::string, std::string>>{
           {"request.gz", "gzip"}, {"request.zlib", "deflate"}, {"request.raw", "deflate"}}) {
    SCOPED_TRACE(file);
    const auto got = http("POST", url, "--data-binary @" + (dir_ / file).string() + " -H 'Content-Encoding: " + coding + "'",
                          dir_.path());
    ASSERT_EQ(got.status, 200) << got.body;
    EXPECT_EQ(json::parse(got.body).at("outputs"), want_outputs);
  }

  // The binary tensor extension: Inference-Header-Content-Length counts the uncompressed JSON.
  const std::string header = json{{"inputs", {{{"name", "input"}, {"shape", {1, 1, 28, 28}}, {"datatype", "UINT8"},
                                               {"parameters", {{"binary_data_size", 784}}}}}}}.dump();
  std::string binary = header;
  for (int p : test_pixels()) binary.push_back(static_cast<char>(p));
  convoy::testing::write_file(dir_ / "request.bin", std::vector<uint8_t>(binary.begin(), binary.end()));
  ASSERT_EQ(run_command("gzip -c " + (dir_ / "request.bin").string() + " > " + (dir_ / "request.bin.gz").string()).status, 0);
  const auto bin = http("POST", url,
                        "--data-binary @" + (dir_ / "request.bin.gz").string() +
                            " -H 'Content-Encoding: gzip' -H 'Inference-Header-Content-Length: " +
                            std::to_string(header.size()) + "'",
                        dir_.path());
  ASSERT_EQ(bin.status, 200) << bin.body;
  EXPECT_EQ(json::parse(bin.body).at("outputs"), want_outputs);
}

TEST_F(ServeCompressionE2E, AcceptEncodingGetsACompressedReply) {
  add_model("fm", 1, checkpoint_a_, "max_batch_size: 4\n");
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  const std::string url = server.url("/v2/models/fm/infer");
  const json request = {{"inputs", {{{"name", "input"}, {"shape", {1, 1, 28, 28}}, {"datatype", "UINT8"},
                                     {"data", test_pixels()}}}}};
  const fs::path plain = dir_ / "request.json";
  convoy::testing::write_text_file(plain, request.dump());
  const auto want = http("POST", url, "--data-binary @" + plain.string(), dir_.path());
  ASSERT_EQ(want.status, 200) << want.body;
  EXPECT_FALSE(has_header(want.headers, "content-encoding:")) << want.headers;

  // gzip, as sent: the bytes are gzip's (magic 1f 8b) and gunzip to the plain reply.
  const fs::path gz = dir_ / "reply.gz";
  const auto r = run_command("curl -s --max-time 60 -D " + (dir_ / "h1").string() + " -o " + gz.string() +
                             " -H 'Accept-Encoding: gzip' --data-binary @" + plain.string() + " '" + url + "'");
  ASSERT_EQ(r.status, 0);
  EXPECT_TRUE(has_header(read_text(dir_ / "h1"), "content-encoding: gzip")) << read_text(dir_ / "h1");
  const std::string gz_bytes = read_text(gz);
  ASSERT_GE(gz_bytes.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(gz_bytes[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(gz_bytes[1]), 0x8b);
  EXPECT_LT(gz_bytes.size(), want.body.size());
  EXPECT_EQ(run_command("gzip -dc " + gz.string()).output, want.body);

  // deflate (the zlib format), inflated by Python's zlib.
  const fs::path zl = dir_ / "reply.zlib";
  ASSERT_EQ(run_command("curl -s --max-time 60 -D " + (dir_ / "h2").string() + " -o " + zl.string() +
                        " -H 'Accept-Encoding: deflate' --data-binary @" + plain.string() + " '" + url + "'")
                .status,
            0);
  EXPECT_TRUE(has_header(read_text(dir_ / "h2"), "content-encoding: deflate")) << read_text(dir_ / "h2");
  ASSERT_TRUE(python_zlib("inflate", zl, dir_ / "reply.txt"));
  EXPECT_EQ(read_text(dir_ / "reply.txt"), want.body);

  // curl --compressed (what a client library does), and q=0 refusing the coding.
  const auto compressed = http("POST", url, "--compressed --data-binary @" + plain.string(), dir_.path());
  ASSERT_EQ(compressed.status, 200) << compressed.body;
  EXPECT_TRUE(has_header(compressed.headers, "content-encoding:")) << compressed.headers;
  EXPECT_EQ(compressed.body, want.body);
  const auto refused = http("POST", url, "-H 'Accept-Encoding: gzip;q=0' --data-binary @" + plain.string(), dir_.path());
  EXPECT_FALSE(has_header(refused.headers, "content-encoding:")) << refused.headers;
  EXPECT_EQ(refused.body, want.body);
}

TEST_F(ServeCompressionE2E, AGzipBombIs413AndACorruptBody400) {
  add_model("fm", 1, checkpoint_a_, "max_batch_size: 4\n");
  ServerProcess server(repo_arg() + " --http-max-input-size 1000000", dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  const std::string url = server.url("/v2/models/fm/infer");
  // 10 MB of zeros is ~10 KB of gzip: well under the limit as sent, ten times over it inflated.
  const fs::path bomb = dir_ / "bomb.gz";
  ASSERT_EQ(run_command("head -c 10000000 /dev/zero | gzip -c > " + bomb.string()).status, 0);
  ASSERT_LT(fs::file_size(bomb), 1000000u);
  const auto big = http("POST", url, "--data-binary @" + bomb.string() + " -H 'Content-Encoding: gzip'", dir_.path());
  EXPECT_EQ(big.status, 413) << big.body;
  EXPECT_NE(big.body.find("1000000"), std::string::npos) << big.body;

  convoy::testing::write_text_file(dir_ / "junk", "this is not gzip data at all");
  const auto junk = http("POST", url, "--data-binary @" + (dir_ / "junk").string() + " -H 'Content-Encoding: gzip'",
                         dir_.path());
  EXPECT_EQ(junk.status, 400) << junk.body;
  EXPECT_NE(junk.body.find("gzip"), std::string::npos) << junk.body;
  const auto junk_deflate = http("POST", url, "--data-binary @" + (dir_ / "junk").string() +
                                     " -H 'Content-Encoding: deflate'", dir_.path());
  EXPECT_EQ(junk_deflate.status, 400) << junk_deflate.body;
  EXPECT_NE(junk_deflate.body.find("deflate"), std::string::npos) << junk_deflate.body;

  // A gzip stream cut short is corrupt too, not a shorter body.
  const json request = {{"inputs", {{{"name", "input"}, {"shape", {1, 1, 28, 28}}, {"datatype", "UINT8"},
                                     {"data", test_pixels()}}}}};
  convoy::testing::write_text_file(dir_ / "request.json", request.dump());
  ASSERT_EQ(run_command("gzip -c " + (dir_ / "request.json").string() + " | head -c 200 > " +
                        (dir_ / "cut.gz").string()).status, 0);
  const auto cut = http("POST", url, "--data-binary @" + (dir_ / "cut.gz").string() + " -H 'Content-Encoding: gzip'",
                        dir_.path());
  EXPECT_EQ(cut.status, 400) << cut.body;
  EXPECT_NE(cut.body.find("gzip"), std::string::npos) << cut.body;

  const auto br = http("POST", url, "--data-binary @" + (dir_ / "request.json").string() + " -H 'Content-Encoding: br'",
                       dir_.path());
  EXPECT_EQ(br.status, 415) << br.body;

  // The server is unharmed and the same body, plain, is answered.
  const auto ok = http("POST", url, "--data-binary @" + (dir_ / "request.json").string(), dir_.path());
  EXPECT_EQ(ok.status, 200) << ok.body;
}

}  // namespace
