// parse_infer_request: the KServe v2 request body read by nlohmann's SAX parser straight into the
// input tensor, within the request's memory budget. A DOM cost ~75x the body (a 64 MiB body of
// '[' took 5 GB and 36 s, and glibc kept most of it); here the only allocations are the tensor,
// a few small strings, and (for data sent before its shape) a float per element.
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

#include <nlohmann/json.hpp>

#include "apps/serve/kserve_json.h"
#include "apps/serve/model_config.h"
#include "apps/serve/request_data.h"
#include "apps/serve/request_fields.h"
#include "apps/serve/shared_memory.h"

namespace convoy::serve {

using json = nlohmann::json;

namespace {

using namespace request_json;

[[noreturn]] void bad(const std::string& what) { throw RequestError(400, what); }

constexpr size_t kMaxDepth = 16;      // any JSON nesting: a KServe body needs about 5 levels
constexpr size_t kMaxDataDepth = 9;   // `data`'s own arrays: a flat list up to a shape of rank 8
constexpr size_t kMaxShapeRank = 16;  // the model takes rank 4; more is refused later, by value
constexpr size_t kMaxOutputs = 16;    // each asks for a copy of the output in the reply
// What a JSON value outside the input's data counts against the budget, as a DOM would hold it:
// bounds the time spent on keys and values the server ignores, not only their memory.
constexpr uint64_t kValueBytes = 16;

const char* const kShmAndData = "input 'input': give its data in shared memory or in the request, not both";
const std::string kBytesAsBinary =
    "input 'input': send BYTES (encoded images) as binary data: parameters.binary_data_size and the "
    "Inference-Header-Content-Length header";

struct PendingOutput {
  std::string name;
  std::optional<bool> binary;  // unset: parameters.binary_data_output
  bool has_classification = false, classification_integer = true;
  int64_t classification = 0;
  SharedMemoryParams shm;
  std::string shm_problem;  // a parameter of the wrong type, said once the name is known
};

// nlohmann's SAX interface: each event is checked against where it is in the body, the input's
// numbers written to the tensor as they come.
class RequestReader {
 public:
  RequestReader(RequestBudget& budget, std::optional<size_t> header_length, std::string_view binary,
                const SharedMemoryRegistry* shm)
      : spec_(budget.spec), budget_(budget), header_length_(header_length), binary_(binary), shm_(shm), data_(budget) {
    stack_.reserve(kMaxDepth);
  }

  bool null() { return in_data() ? not_a_number(Kind::null) : value(Kind::null); }
  bool boolean(bool b) {
    if (in_data()) return not_a_number(Kind::boolean);
    bool_ = b;
    return value(Kind::boolean);
  }
  bool number_integer(int64_t v) {
    if (in_data()) return data_.add(static_cast<double>(v), true, {}), true;
    int_ = v;
    return value(Kind::integer);
  }
  bool number_unsigned(uint64_t v) {
    if (in_data()) return data_.add(static_cast<double>(v), true, {}), true;
    uint_ = v;
    return value(Kind::unsigned_);
  }
  bool number_float(double v, const std::string& text) {
    if (!in_data()) return value(Kind::floating);
    data_.add(v, false, text);
    return true;
  }
  bool string(std::string& s) {
    if (in_data()) return not_a_number(Kind::string);
    string_ = &s;
    return value(Kind::string);
  }
  bool binary(json::binary_t&) { bad("malformed JSON in the request body"); }
  bool start_object(size_t) { return in_data() ? not_a_number(Kind::object) : value(Kind::object); }
  bool start_array(size_t) {
    if (!in_data()) return value(Kind::array);
    if (data_depth_ >= kMaxDataDepth) bad("input 'input': data nested deeper than its shape");
    push(Frame::data);
    ++data_depth_;
    return true;
  }
  bool key(std::string& k) {
    charge(kValueBytes);
    field_ = field_of(stack_.back(), k);
    if (field_ != Field::none) {
      const uint32_t bit = 1u << static_cast<unsigned>(field_);
      if (seen_.back() & bit) bad("duplicate key '" + k + "'");
      seen_.back() |= bit;
    }
    return true;
  }
  bool end_object() { return end(); }
  bool end_array() { return end(); }
  bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception&) {
    bad("malformed JSON in the request body (at byte " + std::to_string(position) + ")");
  }

  // After the body's last event: what only the whole body can say.
  InferRequest finish() {
    if (inputs_ != 1 || !input_done_) bad("'inputs' must be a list of one tensor, '" + std::string(kInputName) + "'");
    if (!binary_.empty()) bad(std::to_string(binary_.size()) + " bytes of binary data beyond the inputs'");
    for (PendingOutput& o : outputs_) {
      const std::string what = "output '" + o.name + "'";
      auto out_shm = o.shm.any() ? slice(what, o.shm) : nullptr;
      if (out_shm && o.classification == 0)  // FP32 (rows, classes): refused now if it cannot fit
        out_shm->check_fits(what, static_cast<uint64_t>(shape_[0] * spec_.classes) * sizeof(float));
      req_.outputs.push_back({std::move(o.name), o.binary.value_or(binary_output_default_), o.classification,
                              std::move(out_shm)});
    }
    if (req_.outputs.empty())
      req_.outputs = {{kLogitsName, binary_output_default_, 0, nullptr},
                      {kProbabilitiesName, binary_output_default_, 0, nullptr}};
    return std::move(req_);
  }

 private:
  bool in_data() const { return !stack_.empty() && stack_.back() == Frame::data; }

  void charge(uint64_t bytes) { budget_.charge(bytes); }
  // The event's string, kept by the request: counted against the budget.
  void keep_string(std::string& to, bool& given) {
    charge(string_->size());
    to = *string_;
    given = true;
  }
  void push(Frame f) {
    if (stack_.size() >= kMaxDepth) bad("the request body is nested deeper than " + std::to_string(kMaxDepth) + " levels");
    stack_.push_back(f);
    seen_.push_back(0);
  }
  // A non-data value (or the start of an object or array) where the frame on top says it goes.
  bool value(Kind kind) {
    charge(kValueBytes);
    if (stack_.empty()) {
      if (kind != Kind::object) bad("the request body must be a JSON object");
      push(Frame::top);
      return true;
    }
    const bool container = kind == Kind::object || kind == Kind::array;
    switch (stack_.back()) {
      case Frame::inputs:
        if (++inputs_ > 1) bad("'inputs' must be a list of one tensor, '" + std::string(kInputName) + "'");
        if (kind != Kind::object) bad("inputs[0] must be an object");
        push(Frame::input);
        return true;
      case Frame::shape:
        if (kind != Kind::integer && kind != Kind::unsigned_) bad("input 'input': shape holds a non-integer");
        if (shape_.size() >= kMaxShapeRank)
          bad("input 'input': shape has more than " + std::to_string(kMaxShapeRank) + " dimensions");
        shape_.push_back(kind == Kind::integer ? int_ : static_cast<int64_t>(uint_));
        return true;
      case Frame::outputs:
        if (kind != Kind::object) bad("outputs: each needs a 'name'");
        if (outputs_.size() >= kMaxOutputs) bad("outputs: more than " + std::to_string(kMaxOutputs) + " asked for");
        charge(sizeof(PendingOutput));
        outputs_.emplace_back();
        push(Frame::output);
        return true;
      case Frame::skip:
        if (container) push(Frame::skip);
        return true;
      default:
        break;
    }
    const Field field = field_;
    field_ = Field::none;
    if (!member(field, kind) && container) push(Frame::skip);
    return true;
  }

  // The value of an object's member; false when it is to be skipped.
  bool member(Field field, Kind kind) {
    const bool integer = kind == Kind::integer || kind == Kind::unsigned_;
    switch (field) {
      case Field::none:
        return false;
      case Field::id:
        if (kind != Kind::string) bad("'id' must be a string");
        charge(string_->size());
        req_.id = *string_;
        return true;
      case Field::params:
        if (kind != Kind::object) bad("'parameters' must be an object");
        push(Frame::top_params);
        return true;
      case Field::timeout:
        if (!integer) bad("parameters.timeout must be an integer number of microseconds >= 0");
        req_.timeout_us = kind == Kind::unsigned_ && uint_ > static_cast<uint64_t>(kMaxTimeoutUs)
                              ? kMaxTimeoutUs
                              : check_timeout(kind == Kind::integer ? int_ : static_cast<int64_t>(uint_));
        return true;
      case Field::binary_data_output:
        if (kind != Kind::boolean) bad("parameters.binary_data_output must be true or false");
        binary_output_default_ = bool_;
        return true;
      case Field::inputs:
        if (kind != Kind::array) bad("'inputs' must be a list of one tensor, '" + std::string(kInputName) + "'");
        push(Frame::inputs);
        return true;
      case Field::name:
        if (kind != Kind::string) return false;  // as no name
        keep_string(name_, has_name_);
        return true;
      case Field::datatype:
        if (kind != Kind::string) bad("input 'input': 'datatype' missing (UINT8 or FP32)");
        keep_string(datatype_, has_datatype_);
        return true;
      case Field::shape:
        if (kind != Kind::array) bad("input 'input': 'shape' missing");
        charge(kMaxShapeRank * sizeof(int64_t));
        has_shape_ = true;
        push(Frame::shape);
        return true;
      case Field::data:
        if (kind != Kind::array) bad("input 'input': 'data' missing (or give binary_data_size)");
        start_data();
        return true;
      case Field::input_params:
        if (kind != Kind::object) return false;  // ignored, as any parameter the server does not know
        push(Frame::input_params);
        return true;
      case Field::binary_data_size:
        has_binary_size_ = true;
        if (kind == Kind::unsigned_) binary_size_ = uint_;
        return kind == Kind::unsigned_;
      case Field::outputs:
        if (kind != Kind::array) bad("'outputs' must be a list");
        push(Frame::outputs);
        return true;
      case Field::output_name: {
        if (kind != Kind::string) bad("outputs: each needs a 'name'");
        const std::string& n = *string_;
        if (n != kLogitsName && n != kProbabilitiesName)
          bad("unknown output '" + n.substr(0, 256) + "'; the model's outputs are '" + kLogitsName + "' and '" +
              kProbabilitiesName + "'");
        outputs_.back().name = n;
        return true;
      }
      case Field::output_params:
        if (kind != Kind::object) return false;
        push(Frame::output_params);
        return true;
      case Field::binary_data:
        if (kind != Kind::boolean) bad("outputs: parameters.binary_data must be true or false");
        outputs_.back().binary = bool_;
        return true;
      case Field::classification: {
        PendingOutput& o = outputs_.back();
        o.has_classification = true;
        o.classification_integer = integer;
        // Above 2^63 - 1: still no count of classes, and the message says so.
        o.classification = kind == Kind::integer ? int_ : uint_ > uint64_t{INT64_MAX} ? INT64_MAX : static_cast<int64_t>(uint_);
        return integer;
      }
      case Field::shm_region:
      case Field::shm_byte_size:
      case Field::shm_offset:
        return shm_parameter(field, kind);
    }
    return false;
  }

  // A shared_memory_* parameter of the input, or of the output whose parameters these are.
  bool shm_parameter(Field field, Kind kind) {
    const bool output = stack_.back() == Frame::output_params;
    SharedMemoryParams& p = output ? outputs_.back().shm : in_shm_;
    std::string problem;
    if (field == Field::shm_region) {
      if (kind == Kind::string) p.region = *string_;
      if (kind == Kind::string) charge(string_->size());
      else problem = "parameters.shared_memory_region must be a string";
    } else if (kind == Kind::integer || kind == Kind::unsigned_) {
      // Past 2^63 - 1: past any region's end all the same.
      (field == Field::shm_byte_size ? p.byte_size : p.offset) =
          kind == Kind::integer ? int_ : static_cast<int64_t>(std::min<uint64_t>(uint_, INT64_MAX));
    } else {
      problem = std::string("parameters.") +
                (field == Field::shm_byte_size ? "shared_memory_byte_size" : "shared_memory_offset") + " must be an integer";
    }
    if (!output && !problem.empty()) bad("input 'input': " + problem);
    if (!output && has_data_) bad(kShmAndData);
    if (output && outputs_.back().shm_problem.empty()) outputs_.back().shm_problem = problem;
    return problem.empty();
  }

  std::shared_ptr<const SharedMemorySlice> slice(const std::string& what, const SharedMemoryParams& p) const {
    if (!shm_) bad(what + ": shared memory is not served here");
    return std::make_shared<const SharedMemorySlice>(shm_->slice(what, p));
  }

  bool end() {
    const Frame f = stack_.back();
    stack_.pop_back();
    seen_.pop_back();
    switch (f) {
      case Frame::data:
        --data_depth_;
        break;
      case Frame::inputs:
        if (inputs_ != 1) bad("'inputs' must be a list of one tensor, '" + std::string(kInputName) + "'");
        break;
      case Frame::input:
        finish_input();
        break;
      case Frame::output:
        finish_output(outputs_.back());
        break;
      default:
        break;
    }
    return true;
  }

  void make_tensor() {
    if (made_) return;
    made_ = true;
    // In shared memory, the tensor is the region's bytes (and not the budget's).
    if (in_shm_.any()) in_slice_ = slice("input 'input'", in_shm_);
    // The shape is checked against the model's before anything is allocated; Tensor::empty's
    // pages are not touched until written.
    req_.input = make_input_tensor(has_name_ ? name_ : "", datatype_, shape_, spec_,
                                   in_slice_ ? in_slice_->allocator("input 'input'") : cpu_allocator());
    if (req_.input.defined() && !in_slice_) charge(req_.input.nbytes());
  }

  void check_finite() const {
    const float* f = req_.input.data<float>();
    for (int64_t i = 0; i < req_.input.numel(); ++i)
      if (!std::isfinite(f[i])) bad("input 'input': FP32 data must be finite");
  }

  // `data`: straight into the tensor when its name, datatype and shape came first (as clients
  // send them), else into `pending_` until they do.
  void start_data() {
    has_data_ = true;
    push(Frame::data);
    data_depth_ = 1;
    if (has_datatype_ && datatype_ == "BYTES") bad(kBytesAsBinary);
    if (in_shm_.any()) bad(kShmAndData);
    if (!has_name_ || !has_datatype_ || !has_shape_) return;
    make_tensor();
    data_.target(req_.input);
  }

  bool not_a_number(Kind kind) {
    bad("input 'input': data holds a " + std::string(kind_name(kind)) + ", expected numbers");
  }

  void finish_input() {
    input_done_ = true;
    if (!has_datatype_) bad("input 'input': 'datatype' missing (UINT8 or FP32)");
    if (!has_shape_) bad("input 'input': 'shape' missing");
    make_tensor();
    if (has_data_ && has_binary_size_)
      bad("input 'input': give its data in 'data' or as binary data (binary_data_size), not both");
    if (in_slice_) {  // read where it is: the batch is assembled straight from the region
      if (has_binary_size_) bad(kShmAndData);
      if (datatype_ == "BYTES")
        req_.encoded = split_bytes_elements(in_slice_->read(), shape_[0]);
      else if (req_.input.dtype() == DType::f32 && req_.input.device().is_cpu())
        check_finite();
      return;
    }
    if (datatype_ == "BYTES") {
      if (!binary_size_ || !header_length_) bad(kBytesAsBinary);
      const uint64_t size = *binary_size_;
      if (size > binary_.size())
        bad("input 'input': truncated binary data: " + std::to_string(binary_.size()) + " of " + std::to_string(size) +
            " bytes");
      req_.encoded = split_bytes_elements(binary_.substr(0, size), shape_[0]);
      binary_.remove_prefix(size);
      return;
    }
    const bool is_u8 = req_.input.dtype() == DType::u8;
    const size_t bytes = req_.input.nbytes();
    if (has_binary_size_) {
      if (!header_length_) bad("input 'input': binary_data_size without an Inference-Header-Content-Length header");
      if (!binary_size_) bad("input 'input': binary_data_size must be a byte count");
      if (*binary_size_ != bytes)
        bad("input 'input': binary_data_size " + std::to_string(*binary_size_) + ", but shape " + shape_str(shape_) +
            " " + datatype_ + " is " + std::to_string(bytes) + " bytes");
      if (binary_.size() < bytes)
        bad("input 'input': truncated binary data: " + std::to_string(binary_.size()) + " of " +
            std::to_string(bytes) + " bytes");
      std::memcpy(req_.input.raw(), binary_.data(), bytes);
      binary_.remove_prefix(bytes);
      if (!is_u8) check_finite();
      return;
    }
    if (!has_data_) bad("input 'input': 'data' missing (or give binary_data_size)");
    data_.finish(req_.input, shape_);
  }

  void finish_output(PendingOutput& o) {
    if (o.name.empty()) bad("outputs: each needs a 'name'");
    if (!o.shm_problem.empty()) bad("output '" + o.name + "': " + o.shm_problem);
    if (!o.has_classification) return;
    if (!o.classification_integer)
      bad("output '" + o.name + "': parameters.classification must be an integer, the number of classes to return");
    o.classification = check_classification(o.name, o.classification, spec_.classes);
  }

  const TensorSpec& spec_;
  RequestBudget& budget_;
  const std::optional<size_t> header_length_;
  std::string_view binary_;  // what follows the JSON header, as yet unread
  const SharedMemoryRegistry* shm_;  // null: shared memory is not served
  std::vector<Frame> stack_;
  std::vector<uint32_t> seen_;  // per frame: the members given (a repeated one is refused)
  Field field_ = Field::none;
  // The scalar of the event being handled.
  bool bool_ = false;
  int64_t int_ = 0;
  uint64_t uint_ = 0;
  const std::string* string_ = nullptr;

  InferRequest req_;
  bool binary_output_default_ = false;
  int inputs_ = 0;
  bool input_done_ = false;
  std::string name_, datatype_;
  Shape shape_;
  bool has_name_ = false, has_datatype_ = false, has_shape_ = false, has_data_ = false, has_binary_size_ = false;
  std::optional<uint64_t> binary_size_;  // set when binary_data_size is a byte count
  SharedMemoryParams in_shm_;
  std::shared_ptr<const SharedMemorySlice> in_slice_;
  bool made_ = false;
  size_t data_depth_ = 0;  // of `data` being read
  DataSink data_;
  std::vector<PendingOutput> outputs_;
};

}  // namespace

uint64_t request_memory_budget(const TensorSpec& spec) {
  if (spec.memory_budget) return spec.memory_budget;
  const auto batch = static_cast<uint64_t>(std::max<int64_t>(spec.max_batch_size, 1));
  return batch * static_cast<uint64_t>(std::max<int64_t>(shape_numel(spec.input), 0)) * sizeof(float) +
         kRequestMetadataBytes;
}

InferRequest parse_infer_request(std::string_view body, std::optional<size_t> header_length, const TensorSpec& spec,
                                 const SharedMemoryRegistry* shm) {
  if (header_length && *header_length > body.size())
    bad("Inference-Header-Content-Length " + std::to_string(*header_length) + " is more than the body's " +
        std::to_string(body.size()) + " bytes");
  const std::string_view header = header_length ? body.substr(0, *header_length) : body;
  const std::string_view binary = header_length ? body.substr(*header_length) : std::string_view{};
  RequestBudget budget{spec, request_memory_budget(spec)};
  TokenGuard guard{budget, std::min<uint64_t>(budget.limit, kRequestMetadataBytes)};
  RequestReader reader(budget, header_length, binary, shm);
  json::sax_parse(GuardedChars(header.data(), &guard), GuardedChars(header.data() + header.size(), &guard), &reader);
  return reader.finish();
}

}  // namespace convoy::serve
