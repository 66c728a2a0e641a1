#include "apps/serve/grpc/grpc_request.h"

#include <cmath>
#include <cstring>

namespace convoy::serve {

std::shared_ptr<const SharedMemorySlice> shared_memory_slice(
    const SharedMemoryRegistry& shm, const google::protobuf::Map<std::string, inference::InferParameter>& parameters,
    const std::string& what) {
  SharedMemoryParams p;
  if (const auto it = parameters.find("shared_memory_region"); it != parameters.end()) {
    if (it->second.parameter_choice_case() != inference::InferParameter::kStringParam)
      throw RequestError(400, what + ": parameters[\"shared_memory_region\"] must be a string_param");
    p.region = it->second.string_param();
  }
  for (auto [key, field] : {std::pair{"shared_memory_byte_size", &p.byte_size}, {"shared_memory_offset", &p.offset}})
    if (const auto it = parameters.find(key); it != parameters.end()) {
      if (it->second.parameter_choice_case() != inference::InferParameter::kInt64Param)
        throw RequestError(400, what + ": parameters[\"" + key + "\"] must be an int64_param");
      *field = it->second.int64_param();
    }
  if (!p.any()) return nullptr;
  return std::make_shared<const SharedMemorySlice>(shm.slice(what, p));
}

InferRequest grpc_infer_request(const inference::ModelInferRequest& q, const TensorSpec& spec,
                                const SharedMemoryRegistry& shm) {
  if (q.inputs_size() != 1) throw RequestError(400, "give one input, '" + std::string(kInputName) + "'");
  const auto& in = q.inputs(0);
  InferRequest req;
  req.id = q.id();
  const auto in_shm = shared_memory_slice(shm, in.parameters(), "input 'input'");  // read in place
  req.input = make_input_tensor(in.name(), in.datatype(), Shape(in.shape().begin(), in.shape().end()), spec,
                                in_shm ? in_shm->allocator("input 'input'") : cpu_allocator());
  const Tensor& input = req.input;
  const auto count = static_cast<size_t>(input.defined() ? input.numel() : 0);
  const bool is_u8 = input.defined() && input.dtype() == DType::u8;
  // Triton's rule: an input's data comes from raw_input_contents or from its contents, not both.
  if (q.raw_input_contents_size() > 0 && in.has_contents())
    throw RequestError(400, "input 'input': give its data in raw_input_contents or in contents, not both");
  if (in_shm) {
    if (q.raw_input_contents_size() > 0 || in.has_contents())
      throw RequestError(400, "input 'input': give its data in shared memory or in the request, not both");
    if (!input.defined()) req.encoded = split_bytes_elements(in_shm->read(), in.shape(0));
  } else if (!input.defined()) {  // BYTES: encoded images, decoded by the model's instance
    const int64_t n = in.shape(0);
    if (q.raw_input_contents_size() > 0) {
      if (q.raw_input_contents_size() != 1) throw RequestError(400, "raw_input_contents: one entry per input (1)");
      req.encoded = split_bytes_elements(q.raw_input_contents(0), n);
    } else {
      const auto& v = in.contents().bytes_contents();
      if (v.size() != n)
        throw RequestError(400, "input 'input': " + std::to_string(v.size()) + " bytes_contents for shape [" +
                                    std::to_string(n) + "]");
      req.encoded.assign(v.begin(), v.end());
    }
  } else if (q.raw_input_contents_size() > 0) {
    if (q.raw_input_contents_size() != 1) throw RequestError(400, "raw_input_contents: one entry per input (1)");
    const std::string& raw = q.raw_input_contents(0);
    if (raw.size() != input.nbytes())
      throw RequestError(400, "input 'input': raw_input_contents holds " + std::to_string(raw.size()) +
                                  " bytes, its shape and datatype " + std::to_string(input.nbytes()));
    std::memcpy(req.input.raw(), raw.data(), raw.size());
  } else if (is_u8) {
    const auto& v = in.contents().uint_contents();
    if (static_cast<size_t>(v.size()) != count)
      throw RequestError(400, "input 'input': " + std::to_string(v.size()) + " uint_contents for " +
                                  std::to_string(count) + " elements");
    uint8_t* dst = req.input.data<uint8_t>();
    for (size_t i = 0; i < count; ++i) {
      if (v[static_cast<int>(i)] > 255) throw RequestError(400, "input 'input': UINT8 data must be 0 to 255");
      dst[i] = static_cast<uint8_t>(v[static_cast<int>(i)]);
    }
  } else {
    const auto& v = in.contents().fp32_contents();
    if (static_cast<size_t>(v.size()) != count)
      throw RequestError(400, "input 'input': " + std::to_string(v.size()) + " fp32_contents for " +
                                  std::to_string(count) + " elements");
    std::memcpy(req.input.raw(), v.data(), count * sizeof(float));
  }
  if (input.defined() && !is_u8 && input.device().is_cpu()) {
    const float* f = input.data<float>();
    for (size_t i = 0; i < count; ++i)
      if (!std::isfinite(f[i])) throw RequestError(400, "input 'input': FP32 data must be finite");
  }
  const int64_t rows = input.defined() ? input.dim(0) : static_cast<int64_t>(req.encoded.size());
  for (const auto& o : q.outputs()) {
    if (o.name() != kLogitsName && o.name() != kProbabilitiesName)
      throw RequestError(400, "unknown output '" + o.name() + "'");
    int64_t k = 0;
    if (auto it = o.parameters().find("classification"); it != o.parameters().end()) {
      if (it->second.parameter_choice_case() != inference::InferParameter::kInt64Param)
        throw RequestError(400, "output '" + o.name() + "': parameters[\"classification\"] must be an int64_param, "
                                "the number of classes to return");
      k = check_classification(o.name(), it->second.int64_param(), spec.classes);
    }
    auto out_shm = shared_memory_slice(shm, o.parameters(), "output '" + o.name() + "'");
    if (out_shm && k == 0)  // FP32 (rows, classes): refused now if it cannot fit
      out_shm->check_fits("output '" + o.name() + "'", static_cast<uint64_t>(rows * spec.classes) * sizeof(float));
    req.outputs.push_back({o.name(), true, k, std::move(out_shm)});
  }
  if (req.outputs.empty()) req.outputs = {{kLogitsName, true, 0, nullptr}, {kProbabilitiesName, true, 0, nullptr}};
  if (auto it = q.parameters().find("timeout"); it != q.parameters().end()) {
    if (it->second.parameter_choice_case() != inference::InferParameter::kInt64Param)
      throw RequestError(400, "parameters[\"timeout\"] must be an int64_param, microseconds >= 0");
    req.timeout_us = check_timeout(it->second.int64_param());
  }
  return req;
}

}  // namespace convoy::serve
