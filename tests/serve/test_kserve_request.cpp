// The streaming KServe v2 request reader (apps/serve/kserve_request.cpp) on its own: data arrives
// the same whether it comes before or after the shape, flat or nested; every refusal says the same
// whichever way the data came; hostile bodies (deep nesting, numbers past the shape or the budget,
// huge strings and numbers, values the server ignores) are refused at once; and the reply, written
// as text, is the document the DOM wrote.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "apps/serve/kserve_json.h"

namespace {

using json = nlohmann::json;
using namespace convoy::serve;

const TensorSpec kSpec{{1, 2, 2}, 2, 4};  // input (n, 1, 2, 2), n <= 2; 4 classes

json input_json(const json& shape, const std::string& dtype, const json& data) {
  return {{"name", "input"}, {"shape", shape}, {"datatype", dtype}, {"data", data}};
}

// `input` as the request's only input, with its members in `order` (data first, say).
std::string request_text(const json& input, const std::vector<std::string>& order) {
  std::string text = "{\"inputs\":[{";
  for (size_t i = 0; i < order.size(); ++i)
    if (input.contains(order[i])) text += (i ? "," : "") + json(order[i]).dump() + ":" + input.at(order[i]).dump();
  return text + "}]}";
}

const std::vector<std::string> kShapeFirst = {"name", "shape", "datatype", "data"};
const std::vector<std::string> kDataFirst = {"data", "datatype", "shape", "name"};

// The status and message of a refused body; {0, ""} when it is taken.
std::pair<unsigned, std::string> refusal(std::string_view body, const TensorSpec& spec = kSpec,
                                         std::optional<size_t> header_length = std::nullopt) {
  try {
    parse_infer_request(body, header_length, spec);
    return {0, ""};
  } catch (const RequestError& e) {
    return {e.status(), e.what()};
  }
}

TEST(KserveRequest, DataBeforeOrAfterItsShapeFlatOrNestedIsTheSameTensor) {
  const json flat = {1.5, -2, 3.25, 4e-3, 5, 6, 7, 8};
  const json nested = {{{{1.5, -2}, {3.25, 4e-3}}}, {{{5, 6}, {7, 8}}}};
  for (const auto& order : {kShapeFirst, kDataFirst})
    for (const json& data : {flat, nested}) {
      const InferRequest r = parse_infer_request(request_text(input_json({2, 1, 2, 2}, "FP32", data), order), {}, kSpec);
      EXPECT_EQ(r.input.shape(), (convoy::Shape{2, 1, 2, 2}));
      EXPECT_EQ(r.input.to_floats(), (std::vector<float>{1.5f, -2, 3.25f, 4e-3f, 5, 6, 7, 8})) << data;
    }
  // UINT8, and channels-last.
  const std::vector<int> pixels = {0, 1, 254, 255};
  for (const auto& order : {kShapeFirst, kDataFirst}) {
    const InferRequest r = parse_infer_request(request_text(input_json({1, 2, 2, 1}, "UINT8", pixels), order), {}, kSpec);
    ASSERT_EQ(r.input.dtype(), convoy::DType::u8);
    EXPECT_EQ(r.input.layout(), convoy::Layout::nhwc);
    EXPECT_EQ(std::vector<uint8_t>(r.input.data<uint8_t>(), r.input.data<uint8_t>() + 4),
              (std::vector<uint8_t>{0, 1, 254, 255}));
  }
  // The request's other members, in any order, unknown ones skipped.
  const InferRequest r = parse_infer_request(
      R"({"outputs":[{"name":"logits","parameters":{"classification":2,"x":[1,{"y":null}]}}],"extra":{"a":[[1]]},)"
      R"("parameters":{"timeout":7,"binary_data_output":true},"id":"r\"1",)"
      R"("inputs":[{"parameters":{"other":1},"data":[1,2,3,4],"datatype":"FP32","shape":[1,1,2,2],"name":"input"}]})",
      {}, kSpec);
  EXPECT_EQ(r.id, "r\"1");
  EXPECT_EQ(r.timeout_us, 7);
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].name, "logits");
  EXPECT_TRUE(r.outputs[0].binary);  // binary_data_output came after it
  EXPECT_EQ(r.outputs[0].classification, 2);
}

TEST(KserveRequest, ARefusedElementSaysTheSameWhereverTheDataCame) {
  struct Case {
    json input;
    std::string says;
  };
  std::vector<double> overflowing = {0.5, 1e39, 0.5, 0.5};
  const std::vector<Case> cases = {
      {input_json({1, 1, 2, 2}, "UINT8", {1, 2, 300, 4}), "input 'input': UINT8 data must be integers 0 to 255"},
      {input_json({1, 1, 2, 2}, "UINT8", {1, 2.5, 3, 4}), "input 'input': UINT8 data must be integers 0 to 255"},
      {input_json({1, 1, 2, 2}, "UINT8", {1, -1, 3, 4}), "input 'input': UINT8 data must be integers 0 to 255"},
      {input_json({1, 1, 2, 2}, "FP32", overflowing), "input 'input': FP32 data must be finite (1e+39 is not a finite float)"},
      {input_json({1, 1, 2, 2}, "FP32", {1, 2, 3}), "input 'input': 3 data elements for shape (1, 1, 2, 2) (4)"},
      {input_json({1, 1, 2, 2}, "FP32", {1, 2, 3, 4, 5}), "input 'input': more data elements than its shape holds (4)"},
      {input_json({1, 1, 2, 2}, "UINT8", {1, 2, 3, 4, 300}), "input 'input': more data elements than its shape holds (4)"},
      {input_json({1, 1, 2, 2}, "FP32", {1, "x"}), "input 'input': data holds a string, expected numbers"},
      {input_json({1, 1, 2, 2}, "FP32", {1, nullptr}), "input 'input': data holds a null, expected numbers"},
      {input_json({1, 1, 2, 2}, "FP32", {1, {{"a", 1}}}), "input 'input': data holds a object, expected numbers"},
      {input_json({1, 1, 2, 3}, "FP32", {1, 2, 3, 4, 5, 6}), "input 'input': shape (1, 1, 2, 3), expected [n, 1, 2, 2]"},
      {input_json({3, 1, 2, 2}, "FP32", {1}), "1 <= n <= 2"},
      {input_json({1, 1, 2, 2}, "INT64", {1, 2, 3, 4}), "input 'input': datatype INT64 is not supported"},
  };
  for (const Case& c : cases)
    for (const auto& order : {kShapeFirst, kDataFirst}) {
      const auto [status, says] = refusal(request_text(c.input, order));
      EXPECT_EQ(status, 400u) << c.input;
      EXPECT_NE(says.find(c.says), std::string::npos) << c.input << (order == kDataFirst ? " data first" : "") << ": " << says;
    }
  // The first refused element is the one named, as the elements come.
  EXPECT_EQ(refusal(request_text(input_json({1, 1, 2, 2}, "FP32", {1e39, "x"}), kDataFirst)).second,
            "input 'input': data holds a string, expected numbers");
  EXPECT_EQ(refusal(request_text(input_json({1, 1, 2, 2}, "FP32", {1e39, 1e40}), kDataFirst)).second,
            "input 'input': FP32 data must be finite (1e+39 is not a finite float)");
}

TEST(KserveRequest, MalformedAndMisshapenRequestsAre400sNamingTheProblem) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{not json", "malformed JSON in the request body (at byte "},
      {R"({"inputs": [)", "malformed JSON"},
      {R"({"id":"a"} x)", "malformed JSON in the request body"},
      {"[1, 2]", "the request body must be a JSON object"},
      {"7", "the request body must be a JSON object"},
      {"{}", "'inputs' must be a list of one tensor"},
      {R"({"inputs":[]})", "'inputs' must be a list of one tensor"},
      {R"({"inputs":{}})", "'inputs' must be a list of one tensor"},
      {R"({"inputs":[1]})", "inputs[0] must be an object"},
      {R"({"id":5,"inputs":[]})", "'id' must be a string"},
      {R"({"parameters":[],"inputs":[]})", "'parameters' must be an object"},
      {R"({"parameters":{"timeout":-1}})", "parameters.timeout -1 must be microseconds >= 0"},
      {R"({"parameters":{"timeout":1.5}})", "parameters.timeout must be an integer"},
      {R"({"parameters":{"binary_data_output":1}})", "parameters.binary_data_output must be true or false"},
      {R"({"inputs":[{"name":"input","shape":[1,1,2,2],"data":[1,2,3,4]}]})", "'datatype' missing"},
      {R"({"inputs":[{"name":"input","datatype":"FP32","data":[1,2,3,4]}]})", "'shape' missing"},
      {R"({"inputs":[{"name":"input","datatype":"FP32","shape":[1,1,2,2]}]})", "'data' missing"},
      {R"({"inputs":[{"name":"input","datatype":"FP32","shape":[1,1.5,2,2],"data":[]}]})", "shape holds a non-integer"},
      {R"({"inputs":[{"name":"image","datatype":"FP32","shape":[1,1,2,2],"data":[1,2,3,4]}]})", "unknown input 'image'"},
      {R"({"inputs":[{"datatype":"FP32","shape":[1,1,2,2],"data":[1,2,3,4]}]})", "unknown input (no name)"},
      {R"({"outputs":[{"name":"scores"}]})", "unknown output 'scores'"},
      {R"({"outputs":[{"parameters":{}}]})", "outputs: each needs a 'name'"},
      {R"({"outputs":"logits"})", "'outputs' must be a list"},
      {R"({"outputs":[{"name":"logits","parameters":{"binary_data":"yes"}}]})", "parameters.binary_data must be true"},
      // Repeated members (a DOM kept the last) and data given twice over are refused.
      {R"({"id":"a","id":"b"})", "duplicate key 'id'"},
      {R"({"inputs":[{"name":"input","datatype":"FP32","shape":[1,1,2,2],"data":[1,2,3,4],)"
       R"("parameters":{"binary_data_size":16}}]})",
       "not both"},
      {R"({"inputs":[{"name":"input","datatype":"BYTES","shape":[1],"data":["x"]}]})", "send BYTES (encoded images) as binary"},
  };
  for (const auto& [body, says] : cases) {
    const auto [status, what] = refusal(body);
    EXPECT_EQ(status, 400u) << body;
    EXPECT_NE(what.find(says), std::string::npos) << body << ": " << what;
  }
  std::string rank17 = R"({"inputs":[{"shape":[1)";
  for (int i = 0; i < 16; ++i) rank17 += ",1";
  EXPECT_EQ(refusal(rank17 + "]}]}").second, "input 'input': shape has more than 16 dimensions");
  std::string outputs = R"({"outputs":[{"name":"logits"})";
  for (int i = 0; i < 16; ++i) outputs += R"(,{"name":"logits"})";
  EXPECT_EQ(refusal(outputs + "]}").second, "outputs: more than 16 asked for");
}

// Seconds `f` took.
template <class F>
double seconds(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(KserveRequest, HostileBodiesAreRefusedAtOnce) {
  const size_t mib64 = size_t{64} << 20;
  const TensorSpec spec{{1, 28, 28}, 8, 10};  // LeNet's input: a budget of 8 * 784 * 4 + 1 MiB
  EXPECT_EQ(request_memory_budget(spec), 8 * 784 * 4 + (uint64_t{1} << 20));
  struct Case {
    std::string name;
    std::function<std::string()> body;  // made when its turn comes: 64 MiB each
    unsigned status;
    std::string says;
  };
  const std::string input_head = R"({"inputs":[{"name":"input","shape":[1,1,28,28],"datatype":"FP32","data":)";
  // `head`, then `part` over and over to 64 MiB, then `tail`.
  auto repeated = [&](const std::string& head, const std::string& part, const std::string& tail) {
    std::string parts = part;
    while (parts.size() * 2 <= mib64) parts += parts;
    return head + parts + tail;
  };
  auto numbers = [&] { return repeated("", "0.5,", "0.5]"); };
  const std::vector<Case> cases = {
      {"64 MiB of [", [&] { return std::string(mib64, '['); }, 400, "the request body must be a JSON object"},
      {"[ in data", [&] { return input_head + std::string(mib64, '['); }, 400,
       "input 'input': data nested deeper than its shape"},
      {"[ elsewhere", [&] { return R"({"x":)" + std::string(mib64, '['); }, 400,
       "the request body is nested deeper than 16 levels"},
      {"{ elsewhere", [&] { return repeated("{", R"("a":{)", ""); }, 400, "nested deeper than 16 levels"},
      {"numbers past the shape", [&] { return input_head + "[" + numbers() + "}]}"; }, 400,
       "more data elements than its shape holds (784)"},
      {"numbers before the shape",
       [&] { return R"({"inputs":[{"data":[)" + numbers() + R"(,"name":"input","shape":[1,1,28,28]}]})"; }, 413,
       "the request needs more than 1073664 bytes of memory to read (its budget: the model's input at max batch as "
       "FP32, plus 1 MiB)"},
      {"numbers the server ignores", [&] { return R"({"x":[)" + numbers() + "}"; }, 413, "bytes of memory to read"},
      {"keys the server ignores", [&] { return repeated("{", R"("k":1,)", R"("k":1})"); }, 413, "bytes of memory to read"},
      {"a 64 MiB id", [&] { return R"({"id":")" + std::string(mib64, 'a') + R"("})"; }, 413, "bytes of memory to read"},
      {"a 64 MiB key", [&] { return R"({")" + std::string(mib64, 'a') + R"(":1})"; }, 413, "bytes of memory to read"},
      {"a 64 MiB number", [&] { return input_head + "[" + std::string(mib64, '1') + "]}]}"; }, 400,
       "longer than 512 characters"},
  };
  for (const Case& c : cases) {
    std::pair<unsigned, std::string> got;
    const std::string body = c.body();
    const double took = seconds([&] { got = refusal(body, spec); });
    EXPECT_EQ(got.first, c.status) << c.name << ": " << got.second;
    EXPECT_NE(got.second.find(c.says), std::string::npos) << c.name << ": " << got.second;
    // What is read before the refusal is at most the budget's worth of text (or a whole body of
    // 64 MiB of one number's digits at worst); the DOM took 36 s and 5 GB for the first.
    EXPECT_LT(took, 2.0) << c.name;
  }
}

TEST(KserveRequest, TheBudgetIsTheModelsLargestInputUnlessSet) {
  // The largest request the model takes fits its default budget, data first or last.
  const TensorSpec spec{{3, 8, 8}, 4, 10};
  const json big = input_json({4, 3, 8, 8}, "FP32", std::vector<float>(4 * 3 * 8 * 8, 0.25f));
  for (const auto& order : {kShapeFirst, kDataFirst})
    EXPECT_EQ(parse_infer_request(request_text(big, order), {}, spec).input.numel(), 4 * 3 * 8 * 8);
  // A budget set below it: a 413, whichever way the data came.
  TensorSpec tight = spec;
  tight.memory_budget = 2000;
  for (const auto& order : {kShapeFirst, kDataFirst}) {
    const auto [status, says] = refusal(request_text(big, order), tight);
    EXPECT_EQ(status, 413u);
    EXPECT_EQ(says, "the request needs more than 2000 bytes of memory to read (its budget: --http-max-request-memory)");
  }
  const json small = input_json({1, 3, 8, 8}, "UINT8", std::vector<int>(3 * 8 * 8, 9));
  EXPECT_EQ(parse_infer_request(request_text(small, kShapeFirst), {}, tight).input.numel(), 3 * 8 * 8);
}

TEST(KserveRequest, BinaryTensorsFollowTheJsonHeader) {
  const std::vector<float> x = {1, 2, 3, 4};
  const std::string header =
      R"({"inputs":[{"name":"input","shape":[1,1,2,2],"datatype":"FP32","parameters":{"binary_data_size":16}}]})";
  const std::string raw(reinterpret_cast<const char*>(x.data()), 16);
  EXPECT_EQ(parse_infer_request(header + raw, header.size(), kSpec).input.to_floats(), x);
  EXPECT_NE(refusal(header + raw.substr(0, 10), kSpec, header.size()).second.find("truncated binary data: 10 of 16"),
            std::string::npos);
  EXPECT_NE(refusal(header + raw + "xx", kSpec, header.size()).second.find("2 bytes of binary data beyond"),
            std::string::npos);
  EXPECT_NE(refusal(header + raw, kSpec).second.find("without an Inference-Header-Content-Length"), std::string::npos);
  EXPECT_NE(refusal(header, kSpec, header.size() + 1).second.find("is more than the body's"), std::string::npos);
  const float inf = std::numeric_limits<float>::infinity();
  const std::string bad_raw(reinterpret_cast<const char*>(&inf), 4);
  EXPECT_EQ(refusal(header + bad_raw + raw.substr(4), kSpec, header.size()).second,
            "input 'input': FP32 data must be finite");
}

// The reply as nlohmann's DOM wrote it before it was written as text.
json dom_reply(const InferRequest& request, const std::vector<float>& logits, const std::vector<float>& probs,
               int64_t classes, const std::vector<std::string>& names) {
  json doc = {{"model_name", "m\"odel"}, {"model_version", "3"}};
  if (!request.id.empty()) doc["id"] = request.id;
  const auto n = static_cast<int64_t>(logits.size()) / classes;
  json outputs = json::array();
  for (const auto& [name, as_binary, k, shm] : request.outputs) {
    const std::vector<float>& values = name == kLogitsName ? logits : probs;
    json out = {{"name", name}, {"datatype", k ? "BYTES" : "FP32"}, {"shape", {n, k ? k : classes}}};
    if (as_binary)
      out["parameters"] = {{"binary_data_size", k ? serialize_bytes_elements(top_k_classes(values, classes, k, names)).size()
                                                  : values.size() * 4}};
    else if (k)
      out["data"] = top_k_classes(values, classes, k, names);
    else
      out["data"] = values;
    outputs.push_back(std::move(out));
  }
  doc["outputs"] = std::move(outputs);
  return doc;
}

TEST(KserveRequest, TheReplyIsTheDocumentTheDomWrote) {
  const std::vector<float> logits = {0.1f, -3.5e-7f, 1e30f, 2, 1.0f / 3, -0.0f, 7, 8};
  const std::vector<float> probs = {0.25f, 0.25f, 0.125f, 0.375f, 1e-45f, 0.5f, 0.2f, 0.3f};
  const std::vector<std::string> names = {"a", "b\"", "c\xc3\xa9", "d"};
  for (const bool binary : {false, true}) {
    InferRequest r;
    r.id = "id \"1\" \xe2\x82\xac";
    r.outputs = {{kLogitsName, binary, 0, nullptr}, {kProbabilitiesName, !binary, 2, nullptr},
                 {kProbabilitiesName, binary, 0, nullptr}};
    const InferReplyBody reply = make_infer_reply(r, "m\"odel", 3, logits, probs, 4, names);
    const std::string_view text = reply.header_length ? std::string_view(reply.body).substr(0, *reply.header_length)
                                                      : std::string_view(reply.body);
    EXPECT_EQ(json::parse(text), dom_reply(r, logits, probs, 4, names)) << text;
    // Its text too (members sorted, as nlohmann wrote them), up to how the numbers are spelled.
    EXPECT_EQ(text.rfind(R"({"id":"id \"1\" €","model_name":"m\"odel","model_version":"3","outputs":[{)", 0), 0u) << text;
  }
  // Values that are not finite are null, as nlohmann wrote them.
  InferRequest r;
  r.outputs = {{kLogitsName, false, 0, nullptr}};
  const std::vector<float> odd = {std::nanf(""), std::numeric_limits<float>::infinity(), 1, 2};
  EXPECT_NE(make_infer_reply(r, "m", 1, odd, odd, 4, {}).body.find(R"("data":[null,null,1,2])"), std::string::npos);
}

}  // namespace
