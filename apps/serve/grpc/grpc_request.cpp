#include "apps/serve/grpc/grpc_request.h"

#include <cmath>
#include <cstring>

namespace convoy::serve {

InferRequest grpc_infer_request(const inference::ModelInferRequest& q, const TensorSpec& spec) {
  if (q.inputs_size() != 1) throw RequestError(400, "give one input, '" + std::string(kInputName) + "'");
  const auto& in = q.inputs(0);
  InferRequest req;
  req.id = q.id();
  req.input = make_input_tensor(in.name(), in.datatype(), Shape(in.shape().begin(), in.shape().end()), spec);
  const Tensor& input = req.input;
  const auto count = static_cast<size_t>(input.defined() ? input.numel() : 0);
  const bool is_u8 = input.defined() && input.dtype() == DType::u8;
  // Triton's rule: an input's data comes from raw_input_contents or from its contents, not both.
  if (q.raw_input_contents_size() > 0 && in.has_contents())
    throw RequestError(400, "input 'input': give its data in raw_input_contents or in contents, not both");
  if (!input.defined()) {  // BYTES: encoded images, decoded by the model's instance
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
  if (input.defined() && !is_u8) {
    const float* f = input.data<float>();
    for (size_t i = 0; i < count; ++i)
      if (!std::isfinite(f[i])) throw RequestError(400, "input 'input': FP32 data must be finite");
  }
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
    req.outputs.push_back({o.name(), true, k});
  }
  if (req.outputs.empty()) req.outputs = {{kLogitsName, true, 0}, {kProbabilitiesName, true, 0}};
  if (auto it = q.parameters().find("timeout"); it != q.parameters().end()) {
    if (it->second.parameter_choice_case() != inference::InferParameter::kInt64Param)
      throw RequestError(400, "parameters[\"timeout\"] must be an int64_param, microseconds >= 0");
    req.timeout_us = check_timeout(it->second.int64_param());
  }
  return req;
}

}  // namespace convoy::serve
