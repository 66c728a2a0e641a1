// Triton's system shared-memory extension of `convoy serve`: the table of regions on its own (what
// it refuses, a slice read and written in place, a mapping that outlives its unregistration while a
// tensor uses it), and end to end on the real server: inputs and outputs in a region the test made
// give exactly what Triton's binary format gives, over HTTP and gRPC, and every misuse is a 400
// (INVALID_ARGUMENT, ALREADY_EXISTS, NOT_FOUND on gRPC) naming what is wrong.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <tuple>

#include <nlohmann/json.hpp>

#include "apps/serve/shared_memory.h"
#include "tests/serve/serve_fixture.h"
#include "tests/serve/shm_client.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using convoy::testing::KeepAliveClient;
using convoy::testing::PosixShm;
using convoy::testing::run_command;
using convoy::testing::ServerProcess;
using ServeSharedMemoryE2E = convoy::testing::ServeTest;
using namespace convoy::serve;
using convoy::DType;
using convoy::Tensor;

// The message of the RequestError `work` throws ("" when it throws none).
template <class Work>
std::string refusal(Work work) {
  try {
    work();
  } catch (const RequestError& e) {
    return std::to_string(e.status()) + " " + e.what();
  }
  return "";
}

TEST(ServeSharedMemory, TheRegistryRefusesWhatTritonRefuses) {
  PosixShm object(2 * 4096 + 100);
  SharedMemoryRegistry shm;
  EXPECT_NE(refusal([&] { shm.register_system("a", "/convoy_no_such_object", 0, 16); }).find("cannot open key"),
            std::string::npos);
  EXPECT_NE(refusal([&] { shm.register_system("a", object.key(), 4096, 4096 + 101); }).find("past the end"),
            std::string::npos);
  EXPECT_NE(refusal([&] { shm.register_system("a", object.key(), 0, 0); }).find("more than 0"), std::string::npos);
  EXPECT_TRUE(shm.system_status("").empty());  // nothing was left registered by the refusals

  shm.register_system("a", object.key(), 4097, 200);  // an offset off a page boundary
  EXPECT_THROW(shm.register_system("a", object.key(), 0, 16), RegionExists);
  const std::vector<SystemRegionStatus> status = shm.system_status("a");
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(status[0].key, object.key());
  EXPECT_EQ(status[0].offset, 4097u);
  EXPECT_EQ(status[0].byte_size, 200u);
  EXPECT_EQ(refusal([&] { shm.system_status("b"); }).substr(0, 3), "404");
  EXPECT_TRUE(shm.cuda_status("").empty());  // one namespace, two kinds

  // A slice must name a registered region, both parameters, and bytes inside it.
  EXPECT_NE(refusal([&] { shm.slice("input 'input'", {"nope", 4, 0}); }).find("'nope' is not registered"),
            std::string::npos);
  EXPECT_NE(refusal([&] { shm.slice("input 'input'", {"a", std::nullopt, 0}); }).find("both"), std::string::npos);
  EXPECT_NE(refusal([&] { shm.slice("input 'input'", {"a", 100, 101}); }).find("past the end"), std::string::npos);
  EXPECT_NE(refusal([&] { shm.slice("input 'input'", {"a", -1, 0}); }).find("0 or more"), std::string::npos);

  std::memcpy(object.data() + 4097 + 3, "hello", 5);
  const SharedMemorySlice s = shm.slice("input 'input'", {"a", 5, 3});
  EXPECT_EQ(s.read(), "hello");
  // A tensor of another size than the slice is refused; one of its size is the slice, in place.
  EXPECT_NE(refusal([&] { Tensor({2, 5}, DType::u8, s.allocator("input 'input'")); }).find("shared_memory_byte_size 5"),
            std::string::npos);
  Tensor view({1, 5}, DType::u8, s.allocator("input 'input'"));
  object.data()[4097 + 3] = 'j';  // the client's write shows through the server's mapping
  EXPECT_EQ(view.data<uint8_t>()[0], 'j');
  object.data()[4097 + 3] = 'h';

  // FP32 off a float's boundary (the region starts at 4097) is copied to aligned memory, not read
  // misaligned in place (UINT8, above, is read in place at any offset).
  const float fours[4] = {1.5f, -2.f, 3.25f, 4.f};
  std::memcpy(object.data() + 4097 + 64, fours, sizeof fours);
  const Tensor fp32 = make_input_tensor("input", "FP32", {1, 1, 2, 2}, TensorSpec{{1, 2, 2}, 1, 2},
                                        shm.slice("input 'input'", {"a", 16, 64}).allocator("input 'input'"));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(fp32.raw()) % alignof(float), 0u);
  EXPECT_EQ(std::memcmp(fp32.raw(), fours, sizeof fours), 0);

  // Unregistered, the name is gone at once, but the tensor still reads the mapping it holds.
  shm.unregister_cuda("a");  // another kind's name: nothing happens
  EXPECT_EQ(shm.system_status("").size(), 1u);
  shm.unregister_system("a");
  shm.unregister_system("a");  // as Triton: a name not registered is no error
  EXPECT_TRUE(shm.system_status("").empty());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(view.data<uint8_t>()), 5), "hello");
  s.write("output 'logits'", "HELLO", 5);
  EXPECT_EQ(std::string(object.data() + 4097 + 3, 5), "HELLO");
  EXPECT_NE(refusal([&] { s.write("output 'logits'", "123456", 6); }).find("do not fit"), std::string::npos);

  if (const std::string why = cuda_shared_memory_unavailable_reason(); !why.empty()) {
    EXPECT_NE(refusal([&] { shm.register_cuda("c", std::string(64, '\0'), 0, 16); }).find(why), std::string::npos);
  }
}

// The test's inputs and outputs: n LeNet-5 images at kInOffset of one object, outputs after them.
constexpr int64_t kN = 3, kClasses = 10;
constexpr size_t kInOffset = 64, kImageBytes = 784;
constexpr size_t kProbsOffset = 4096, kLogitsOffset = 8192, kClassesOffset = 12288;

json shm_params(const std::string& region, size_t offset, size_t bytes) {
  return {{"shared_memory_region", region}, {"shared_memory_offset", offset}, {"shared_memory_byte_size", bytes}};
}
json shm_input(const std::string& region, size_t offset = kInOffset, size_t bytes = kN * kImageBytes) {
  return {{"name", "input"}, {"datatype", "UINT8"}, {"shape", {kN, 1, 28, 28}}, {"parameters", shm_params(region, offset, bytes)}};
}

TEST_F(ServeSharedMemoryE2E, InputsAndOutputsInSharedMemoryAreTheBinaryResultExactly) {
  add_model("fm", 1, checkpoint_a_, "max_batch_size: 8\ndevice: cpu\n");
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  PosixShm object(4 * 4096);
  std::mt19937 rng(11);
  std::vector<uint8_t> pixels(kN * kImageBytes);
  for (uint8_t& p : pixels) p = static_cast<uint8_t>(rng());
  std::memcpy(object.data() + kInOffset, pixels.data(), pixels.size());

  // The reference: the same pixels in Triton's binary format, outputs binary.
  KeepAliveClient client(server.port());
  const std::string header =
      json{{"inputs", {{{"name", "input"}, {"datatype", "UINT8"}, {"shape", {kN, 1, 28, 28}},
                        {"parameters", {{"binary_data_size", pixels.size()}}}}}},
           {"outputs", {{{"name", "probabilities"}, {"parameters", {{"binary_data", true}}}},
                        {{"name", "logits"}, {"parameters", {{"binary_data", true}}}},
                        {{"name", "probabilities"}, {"parameters", {{"binary_data", true}, {"classification", 3}}}}}}}
          .dump();
  const auto binary = client.call("POST", "/v2/models/fm/infer", header + std::string(pixels.begin(), pixels.end()),
                                  header.size());
  ASSERT_EQ(binary.status, 200) << binary.body;
  const std::string tensors = binary.body.substr(binary.header_length);
  const size_t out_bytes = kN * kClasses * sizeof(float);
  const std::string classes = tensors.substr(2 * out_bytes);

  // The same through the region: registered over HTTP, as tritonclient does.
  const json reg = {{"key", object.key()}, {"offset", 0}, {"byte_size", object.size()}};
  ASSERT_EQ(client.call("POST", "/v2/systemsharedmemory/region/io/register", reg.dump()).status, 200);
  const auto status = client.call("GET", "/v2/systemsharedmemory/status");
  EXPECT_EQ(json::parse(status.body),
            json::parse(R"([{"name": "io", "key": ")" + object.key() + R"(", "offset": 0, "byte_size": 16384}])"));
  const json request = {
      {"inputs", {shm_input("io")}},
      {"outputs", {{{"name", "probabilities"}, {"parameters", shm_params("io", kProbsOffset, out_bytes)}},
                   {{"name", "logits"}, {"parameters", shm_params("io", kLogitsOffset, out_bytes + 100)}},
                   {{"name", "probabilities"},
                    {"parameters", {{"classification", 3}, {"shared_memory_region", "io"},
                                    {"shared_memory_offset", kClassesOffset}, {"shared_memory_byte_size", 4096}}}}}}};
  const auto r = client.call("POST", "/v2/models/fm/infer", request.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header_length, 0u);  // no data in the reply
  const json reply = json::parse(r.body);
  for (const json& o : reply.at("outputs")) {
    EXPECT_FALSE(o.contains("data")) << o;
    EXPECT_EQ(o.at("parameters").at("shared_memory_region"), "io") << o;
  }
  EXPECT_EQ(reply.at("outputs")[0].at("shape"), json::array({kN, kClasses}));
  EXPECT_EQ(reply.at("outputs")[2].at("parameters").at("shared_memory_byte_size"), classes.size());
  EXPECT_EQ(std::string(object.data() + kProbsOffset, out_bytes), tensors.substr(0, out_bytes));
  EXPECT_EQ(std::string(object.data() + kLogitsOffset, out_bytes), tensors.substr(out_bytes, out_bytes));
  EXPECT_EQ(std::string(object.data() + kClassesOffset, classes.size()), classes);

  // gRPC: the same region from the other protocol, and its RPCs (tests/serve/grpc_shared_memory.py).
  if (run_command("/usr/bin/python3 -c 'import grpc, grpc_tools' 2>&1").status != 0)
    GTEST_SKIP() << "Debian's python3-grpcio and python3-grpc-tools are not installed";
  if (server.grpc_port() < 0) GTEST_SKIP() << "convoy was built without gRPC: " << server.log();
  std::memset(object.data() + kProbsOffset, 0, out_bytes);
  fs::create_directories(dir_ / "stubs");
  const auto g = run_command("/usr/bin/python3 " + std::string(CONVOY_SOURCE_DIR) + "/tests/serve/grpc_shared_memory.py " +
                             CONVOY_SOURCE_DIR + "/apps/serve/grpc " + (dir_ / "stubs").string() + " " +
                             std::to_string(server.port()) + " " + std::to_string(server.grpc_port()) + " fm " + object.key() + " " + std::to_string(kN) + " " +
                             std::to_string(kInOffset) + " " + std::to_string(kProbsOffset) + " 2>&1");
  ASSERT_EQ(g.status, 0) << g.output;
  const json got = json::parse(g.output);
  EXPECT_EQ(got.at("probabilities_in_shm").get<std::string>(), "");  // its raw_output_contents place, empty
  EXPECT_EQ(std::string(object.data() + kProbsOffset, out_bytes), tensors.substr(0, out_bytes));
  EXPECT_EQ(got.at("logits_raw").get<std::vector<float>>().size(), static_cast<size_t>(kN * kClasses));
  std::vector<float> logits(kN * kClasses);
  std::memcpy(logits.data(), tensors.data() + out_bytes, out_bytes);
  EXPECT_EQ(got.at("logits_raw").get<std::vector<float>>(), logits);
  EXPECT_EQ(got.at("status").at("g").at("key"), object.key());
  // Registered on gRPC, seen on HTTP beside HTTP's own.
  EXPECT_EQ(got.at("status_http_region"), json::array({"g", "io"}));
  const std::map<std::string, std::string> codes = {
      {"duplicate", "ALREADY_EXISTS"},     {"unknown_region", "INVALID_ARGUMENT"}, {"past_end", "INVALID_ARGUMENT"},
      {"size_mismatch", "INVALID_ARGUMENT"}, {"shm_and_raw", "INVALID_ARGUMENT"},  {"output_too_small", "INVALID_ARGUMENT"},
      {"cuda_register", "INVALID_ARGUMENT"}, {"status_after_unregister", "NOT_FOUND"}};
  for (const auto& [what, code] : codes)
    EXPECT_EQ(got.at(what).get<std::string>().rfind(code, 0), 0u) << what << ": " << got.at(what);
  EXPECT_EQ(got.at("cuda_status"), json::object());
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST_F(ServeSharedMemoryE2E, MisuseIsA400NamingWhatIsWrong) {
  add_model("fm", 1, checkpoint_a_, "max_batch_size: 8\ndevice: cpu\n");
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  PosixShm object(4096);
  KeepAliveClient client(server.port());
  const auto reg = [&](const std::string& name, const json& body) {
    return client.call("POST", "/v2/systemsharedmemory/region/" + name + "/register", body.dump());
  };
  ASSERT_EQ(reg("r", {{"key", object.key()}, {"offset", 0}, {"byte_size", 4096}}).status, 200);
  const std::vector<std::tuple<std::string, json, std::string>> bad_registers = {
      {"r", {{"key", object.key()}, {"offset", 0}, {"byte_size", 16}}, "already registered"},
      {"r2", {{"key", "/convoy_no_such_object"}, {"byte_size", 16}}, "cannot open key"},
      {"r2", {{"key", object.key()}, {"offset", 4000}, {"byte_size", 100}}, "past the end"},
      {"r2", {{"key", object.key()}, {"byte_size", -1}}, "'byte_size' must be an integer 0 or more"},
      {"r2", {{"offset", 0}, {"byte_size", 16}}, "'key'"}};
  for (const auto& [name, body, says] : bad_registers) {
    const auto r = reg(name, body);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_NE(r.body.find(says), std::string::npos) << body << ": " << r.body;
  }
  EXPECT_EQ(client.call("GET", "/v2/systemsharedmemory/status").body.find("r2"), std::string::npos);
  EXPECT_EQ(client.call("POST", "/v2/systemsharedmemory/region/r/register", "not json").status, 400);
  EXPECT_EQ(client.call("GET", "/v2/systemsharedmemory/region/nope/status").status, 404);
  EXPECT_EQ(client.call("POST", "/v2/systemsharedmemory/region/nope/unregister").status, 200);  // as Triton

  const auto infer = [&](const json& input, const json& outputs = json::array()) {
    json body = {{"inputs", {input}}};
    if (!outputs.empty()) body["outputs"] = outputs;
    return client.call("POST", "/v2/models/fm/infer", body.dump());
  };
  const size_t in_bytes = kN * kImageBytes;
  json with_data = shm_input("r");
  with_data["data"] = std::vector<int>(in_bytes, 1);
  json region_only = shm_input("r");
  region_only["parameters"].erase("shared_memory_byte_size");
  const std::vector<std::pair<json, std::string>> bad_inputs = {
      {shm_input("unknown"), "region 'unknown' is not registered"},
      {shm_input("r", 4096 - 100, in_bytes), "past the end of region 'r'"},
      {shm_input("r", 0, in_bytes + 1), "shared_memory_byte_size 2353, but its shape and datatype are 2352 bytes"},
      {with_data, "not both"},
      {region_only, "needs both shared_memory_region and shared_memory_byte_size"}};
  for (const auto& [input, says] : bad_inputs) {
    const auto r = infer(input);
    EXPECT_EQ(r.status, 400) << input;
    EXPECT_NE(r.body.find(says), std::string::npos) << r.body;
  }
  const auto small = infer(shm_input("r", 0),
                           {{{"name", "logits"}, {"parameters", shm_params("r", 3000, kN * kClasses * 4 - 1)}}});
  EXPECT_EQ(small.status, 400);
  EXPECT_NE(small.body.find("output 'logits': 120 bytes do not fit in its shared_memory_byte_size 119"), std::string::npos)
      << small.body;
  const auto classes = infer(shm_input("r", 0),  // BYTES: its size known once it ran
                             {{{"name", "logits"}, {"parameters", {{"classification", 10}, {"shared_memory_region", "r"},
                                                                   {"shared_memory_byte_size", 20}}}}});
  EXPECT_EQ(classes.status, 400);
  EXPECT_NE(classes.body.find("do not fit"), std::string::npos) << classes.body;
  EXPECT_EQ(infer(shm_input("r", 0)).status, 200);  // and the server goes on

  // CUDA shared memory: refused with the reason where it is not served.
  if (const std::string why = cuda_shared_memory_unavailable_reason(); !why.empty()) {
    const auto r = client.call("POST", "/v2/cudasharedmemory/region/c/register",
                               R"({"raw_handle": {"b64": "AAAA"}, "device_id": 0, "byte_size": 16})");
    EXPECT_EQ(r.status, 400);
    EXPECT_NE(r.body.find(why), std::string::npos) << r.body;
    EXPECT_EQ(json::parse(client.call("GET", "/v2").body).at("extensions").dump().find("cuda"), std::string::npos);
  }
  EXPECT_EQ(client.call("GET", "/v2/cudasharedmemory/status").body, "[]");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
