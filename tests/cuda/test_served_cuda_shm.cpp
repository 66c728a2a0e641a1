// `convoy serve` with Triton's CUDA shared-memory extension: this test is the client. Its images are
// in its own device memory, handed to the server as a cudaIpcMemHandle_t, and the outputs come back
// there; they are what Triton's binary format gives for the same pixels. For a model on the GPU (the
// region copied device to device into the batch) and one on the CPU (copied down to the host), alone
// and with two requests merged into one batch. Skipped, saying why, without a usable GPU.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/backends/backend.h"
#include "engine/bundle/run_checkpoint.h"
#include "engine/graph/model.h"
#include "tests/serve/serve_harness.h"
#include "tests/temp_dir.h"

namespace {

using json = nlohmann::json;
using convoy::testing::http;
using convoy::testing::HttpResult;
using convoy::testing::ServerProcess;

constexpr int64_t kN = 2, kClasses = 10;
constexpr size_t kImageBytes = 784, kOutBytes = kN * kClasses * sizeof(float);

// LeNet-5 with its initial weights (speed and agreement do not need trained ones).
void write_lenet(const std::filesystem::path& path) {
  convoy::Model model = convoy::Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/lenet5.yaml", 3);
  convoy::RunCheckpointInfo info;
  info.model_yaml = model.yaml();
  for (int64_t c = 0; c < kClasses; ++c) info.class_names.push_back(std::to_string(c));
  info.input_shape = model.input_shape();
  info.mean = {0.3};
  info.std = {0.35};
  std::filesystem::create_directories(path.parent_path());
  convoy::save_run_checkpoint(path, model, {}, info);
}

// The client's device memory, and its IPC handle in base64 for the register request.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    EXPECT_EQ(cudaMalloc(&data_, bytes), cudaSuccess);
    cudaIpcMemHandle_t handle;
    EXPECT_EQ(cudaIpcGetMemHandle(&handle, data_), cudaSuccess);
    static const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const auto* b = reinterpret_cast<const uint8_t*>(&handle);
    for (size_t i = 0; i < sizeof handle; i += 3) {
      const size_t n = std::min<size_t>(3, sizeof handle - i);
      const uint32_t v = b[i] << 16 | (n > 1 ? b[i + 1] << 8 : 0) | (n > 2 ? b[i + 2] : 0);
      for (size_t k = 0; k < 4; ++k) b64_ += k <= n ? digits[(v >> (18 - 6 * k)) & 63] : '=';
    }
  }
  ~DeviceBuffer() { cudaFree(data_); }
  void put(size_t offset, const void* src, size_t bytes) {
    ASSERT_EQ(cudaMemcpy(static_cast<char*>(data_) + offset, src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::string get(size_t offset, size_t bytes) const {
    std::string out(bytes, '\0');
    EXPECT_EQ(cudaMemcpy(out.data(), static_cast<const char*>(data_) + offset, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  size_t size() const { return bytes_; }
  const std::string& b64() const { return b64_; }

 private:
  void* data_ = nullptr;
  size_t bytes_;
  std::string b64_;
};

class ServedCudaShm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = convoy::cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
    cudaSetDevice(0);
  }
  HttpResult post(const ServerProcess& s, const std::string& path, const std::string& body, size_t header_length = 0) {
    static int k = 0;
    const std::filesystem::path file = dir_ / ("body" + std::to_string(k++));
    convoy::testing::write_text_file(file, body);
    const std::string header = header_length ? " -H 'Inference-Header-Content-Length: " + std::to_string(header_length) + "'" : "";
    return http("POST", s.url(path), "--data-binary @" + file.string() + header, dir_.path());
  }
  convoy::testing::TempDir dir_{"convoy-served-cuda-shm"};
};

json shm(const std::string& region, size_t offset, size_t bytes) {
  return {{"shared_memory_region", region}, {"shared_memory_offset", offset}, {"shared_memory_byte_size", bytes}};
}

std::vector<float> floats(const std::string& bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

TEST_F(ServedCudaShm, InputsAndOutputsInTheClientsGpuMemory) {
  const std::filesystem::path repo = dir_ / "repo";
  for (const char* device : {"cuda", "cpu"}) {
    write_lenet(repo / device / "1" / "model.safetensors");
    convoy::testing::write_text_file(repo / device / "config.yaml",
                                     std::string("max_batch_size: 8\ndevice: ") + device +
                                         "\ndynamic_batching: {max_queue_delay_microseconds: 300000, "
                                         "preferred_batch_size: [4]}\n");
  }
  ServerProcess server("--model-repository " + repo.string(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  const HttpResult meta = http("GET", server.url("/v2"), "", dir_.path());
  EXPECT_NE(meta.body.find("\"cuda_shared_memory\""), std::string::npos) << meta.body;

  // Two requests' pixels (kN images each) at 0 and 4096; their outputs at 8192 and 12288.
  DeviceBuffer buffer(16384);
  std::mt19937 rng(9);
  std::vector<std::string> pixels(2, std::string(kN * kImageBytes, '\0'));
  for (int r = 0; r < 2; ++r) {
    for (char& p : pixels[r]) p = static_cast<char>(rng());
    buffer.put(4096 * r, pixels[r].data(), pixels[r].size());
  }
  const json reg = {{"raw_handle", {{"b64", buffer.b64()}}}, {"device_id", 0}, {"byte_size", buffer.size()}};
  HttpResult r = post(server, "/v2/cudasharedmemory/region/gpu/register", reg.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(post(server, "/v2/cudasharedmemory/region/gpu/register", reg.dump()).status, 400);  // taken
  r = http("GET", server.url("/v2/cudasharedmemory/status"), "", dir_.path());
  EXPECT_EQ(json::parse(r.body), json::parse(R"([{"name": "gpu", "device_id": 0, "byte_size": 16384}])"));

  const auto binary = [&](const std::string& model, const std::string& px) {
    const std::string header =
        json{{"inputs", {{{"name", "input"}, {"datatype", "UINT8"}, {"shape", {kN, 1, 28, 28}},
                          {"parameters", {{"binary_data_size", px.size()}}}}}},
             {"outputs", {{{"name", "probabilities"}, {"parameters", {{"binary_data", true}}}}}}}
            .dump();
    const HttpResult b = post(server, "/v2/models/" + model + "/infer", header + px, header.size());
    EXPECT_EQ(b.status, 200) << b.body;
    return b.body.size() >= kOutBytes ? b.body.substr(b.body.size() - kOutBytes) : std::string();
  };
  const auto in_shm = [&](const std::string& model, int request) {
    const json body = {{"inputs", {{{"name", "input"}, {"datatype", "UINT8"}, {"shape", {kN, 1, 28, 28}},
                                    {"parameters", shm("gpu", 4096 * request, kN * kImageBytes)}}}},
                       {"outputs", {{{"name", "probabilities"}, {"parameters", shm("gpu", 8192 + 4096 * request, kOutBytes)}}}}};
    return post(server, "/v2/models/" + model + "/infer", body.dump());
  };
  for (const char* model : {"cuda", "cpu"}) {
    // Alone: the same batch as the binary request, so the same bits.
    const std::string want = binary(model, pixels[0]);
    r = in_shm(model, 0);
    ASSERT_EQ(r.status, 200) << model << ": " << r.body;
    EXPECT_EQ(r.body.find("\"data\""), std::string::npos) << r.body;
    EXPECT_EQ(buffer.get(8192, kOutBytes), want) << model;
    // Two at once, merged into one batch of 4 (their rows gathered on the host): within rounding.
    HttpResult both[2];
    std::thread other([&] { both[1] = in_shm(model, 1); });
    both[0] = in_shm(model, 0);
    other.join();
    for (int k = 0; k < 2; ++k) {
      ASSERT_EQ(both[k].status, 200) << model << ": " << both[k].body;
      const std::vector<float> got = floats(buffer.get(8192 + 4096 * k, kOutBytes)), ref = floats(binary(model, pixels[k]));
      ASSERT_EQ(got.size(), ref.size());
      for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-5) << model << " request " << k;
    }
  }
  // Unregistered: the name is gone, and the server answers a request naming it with a 400.
  EXPECT_EQ(post(server, "/v2/cudasharedmemory/region/gpu/unregister", "").status, 200);
  EXPECT_EQ(http("GET", server.url("/v2/cudasharedmemory/status"), "", dir_.path()).body, "[]");
  r = in_shm("cuda", 0);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("not registered"), std::string::npos) << r.body;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
