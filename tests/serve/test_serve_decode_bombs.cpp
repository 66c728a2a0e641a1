// Decode bombs: PNGs of millions of 16-bit RGBA pixels that are a few hundred kilobytes on the
// wire. Those under the image budget are decoded by the request workers while /v2/health/live
// keeps answering within 100 ms; one over it is refused with 413 before any pixel is decoded;
// a full worker queue answers 503 at once.
#include <gtest/gtest.h>

#include <future>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/serve/image_budget.h"
#include "apps/serve/kserve_json.h"
#include "tests/serve/raw_http.h"
#include "tests/serve/serve_harness.h"
#include "tests/serve/serve_models.h"

namespace {

namespace fs = std::filesystem;
using namespace convoy::testing;
using json = nlohmann::json;

// A binary-format infer request of one BYTES element, `image`: the JSON header's length and the body.
std::pair<size_t, std::string> bytes_request(const std::string& image) {
  const auto n = static_cast<uint32_t>(image.size());
  const std::string element = std::string{static_cast<char>(n), static_cast<char>(n >> 8), static_cast<char>(n >> 16),
                                          static_cast<char>(n >> 24)} + image;
  const std::string header = json{{"inputs", {{{"name", "input"}, {"shape", {1}}, {"datatype", "BYTES"},
                                              {"parameters", {{"binary_data_size", element.size()}}}}}}}
                                 .dump();
  return {header.size(), header + element};
}

// POST with the binary tensor extension's header, on a connection of its own.
RawReply post_binary(int port, const std::string& path, const std::pair<size_t, std::string>& request) {
  const int fd = connect_local(port);
  RawReply r;
  if (fd < 0) return r;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string head = "POST " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: " +
                           std::to_string(request.second.size()) + "\r\nInference-Header-Content-Length: " +
                           std::to_string(request.first) + "\r\n\r\n";
  std::string reply;
  if (send_all(fd, head) && send_all(fd, request.second)) {
    char buf[4096];
    for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) reply.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (reply.rfind("HTTP/1.1 ", 0) == 0) r.status = std::stoi(reply.substr(9, 3));
  if (const size_t end = reply.find("\r\n\r\n"); end != std::string::npos) r.body = reply.substr(end + 4);
  return r;
}

TEST(ServeImageBudget, CostsComeFromTheHeaderAtTheDecodedDepth) {
  using convoy::serve::image_cost;
  const convoy::serve::ImageCost rgba16 = image_cost(zero_png(100, 50, 16, 6));
  EXPECT_EQ(rgba16.pixels, 5000);
  EXPECT_EQ(rgba16.bytes, 5000 * 8);
  EXPECT_EQ(image_cost(zero_png(100, 50, 8, 2)).bytes, 5000 * 3);
  EXPECT_EQ(image_cost("not an image").pixels, 0);  // the decoder says why
  convoy::serve::ImageBudget budget;
  budget.max_pixels = 10000;
  EXPECT_NO_THROW(convoy::serve::check_image_budget({zero_png(100, 50, 8, 2), zero_png(100, 50, 8, 2)}, budget));
  EXPECT_THROW(convoy::serve::check_image_budget({zero_png(100, 101, 8, 2)}, budget), convoy::serve::RequestError);
  budget.max_bytes = 5000 * 8 - 1;  // the same pixels at 16 bits are over
  EXPECT_THROW(convoy::serve::check_image_budget({zero_png(100, 50, 16, 6)}, budget), convoy::serve::RequestError);
}

class ServeDecodeBombs : public ::testing::Test {
 protected:
  void SetUp() override { write_tiny_repository(dir_.path() / "repo"); }
  std::string repo_arg() const { return "--model-repository " + (dir_.path() / "repo").string() + " "; }
  TempDir dir_{"convoy-serve-bombs"};
};

TEST_F(ServeDecodeBombs, HealthAnswersWhileBombsDecodeAndOneOverBudgetIs413) {
  ServerProcess server(repo_arg() + "--max-image-pixels 20000000 --worker-thread-count 2", dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  // 16.8 MP of RGBA16: 134 MB once inflated (under the default byte budget), 130 KB sent.
  const std::string bomb = zero_png(4096, 4096, 16, 6);
  const std::string over = zero_png(5000, 5000, 8, 2);  // 25 MP: over --max-image-pixels
  std::atomic<bool> done{false};
  std::vector<RawReply> health;
  std::thread prober([&] {
    while (!done) {
      health.push_back(raw_request(server.port(), "GET", "/v2/health/live", "", 5000));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  std::vector<std::future<RawReply>> bombs;
  for (int i = 0; i < 2; ++i)
    bombs.push_back(std::async(std::launch::async, [&] {
      return raw_request(server.port(), "POST", "/v2/models/tiny/classify", bomb, 60000);
    }));
  bombs.push_back(std::async(std::launch::async, [&] {
    return post_binary(server.port(), "/v2/models/tiny/infer", bytes_request(bomb));
  }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the bombs hold both workers
  const RawReply refused = raw_request(server.port(), "POST", "/v2/models/tiny/classify", over, 60000);
  for (auto& b : bombs) {
    const RawReply r = b.get();
    EXPECT_EQ(r.status, 200) << r.body;
  }
  done = true;
  prober.join();

  EXPECT_EQ(refused.status, 413) << refused.body;
  EXPECT_NE(refused.body.find("25.0 million pixels, over the budget of 20.0 million pixels a request "
                              "(--max-image-pixels)"),
            std::string::npos)
      << refused.body;
  EXPECT_LT(refused.ms, 100.0) << "refused before it waited for a worker";
  ASSERT_GE(health.size(), 5u);
  double worst = 0;
  for (const RawReply& h : health) {
    EXPECT_EQ(h.status, 200);
    worst = std::max(worst, h.ms);
  }
  EXPECT_LT(worst, 100.0) << health.size() << " probes";
  std::cout << "health: " << health.size() << " probes while the bombs decoded, slowest " << worst << " ms\n";
}

TEST_F(ServeDecodeBombs, AFullWorkerQueueAnswers503AtOnce) {
  ServerProcess server(repo_arg() + "--worker-thread-count 1 --worker-queue-size 1", dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  const std::string bomb = zero_png(4096, 4096, 16, 6);
  auto first = std::async(std::launch::async, [&] {
    return raw_request(server.port(), "POST", "/v2/models/tiny/classify", bomb, 60000);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the one worker decodes it
  auto second = std::async(std::launch::async, [&] {
    return raw_request(server.port(), "POST", "/v2/models/tiny/classify", bomb, 60000);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // it waits in the queue
  const RawReply third = raw_request(server.port(), "POST", "/v2/models/tiny/classify", bomb, 60000);
  EXPECT_EQ(third.status, 503) << third.body;
  EXPECT_NE(third.body.find("--worker-queue-size"), std::string::npos) << third.body;
  EXPECT_EQ(first.get().status, 200);
  EXPECT_EQ(second.get().status, 200);
  EXPECT_EQ(raw_request(server.port(), "GET", "/v2/health/live").status, 200);
}

}  // namespace
