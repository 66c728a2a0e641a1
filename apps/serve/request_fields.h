#pragma once
// Where a key of a KServe v2 infer request's JSON leads, for the streaming reader
// (kserve_request.cpp): the objects and arrays of a request, the members the server reads, and
// which member each key names in each of them.
#include <cstdint>
#include <string>

namespace convoy::serve::request_json {

enum class Frame : uint8_t { top, top_params, inputs, input, shape, input_params, data, outputs, output, output_params, skip };
// The member a key names (none: one the server ignores, whose value is skipped).
enum class Field : uint8_t {
  none, id, params, inputs, outputs, timeout, binary_data_output, name, datatype, shape, data, input_params,
  binary_data_size, output_name, output_params, binary_data, classification, shm_region, shm_byte_size, shm_offset
};
enum class Kind : uint8_t { null, boolean, integer, unsigned_, floating, string, object, array };

inline const char* kind_name(Kind k) {
  switch (k) {
    case Kind::null: return "null";
    case Kind::boolean: return "boolean";
    case Kind::string: return "string";
    case Kind::object: return "object";
    case Kind::array: return "array";
    default: return "number";
  }
}

// Triton's shared-memory parameters, of an input or an output.
inline Field shm_field(const std::string& key) {
  return key == "shared_memory_region"      ? Field::shm_region
         : key == "shared_memory_byte_size" ? Field::shm_byte_size
         : key == "shared_memory_offset"    ? Field::shm_offset
                                            : Field::none;
}

inline Field field_of(Frame f, const std::string& key) {
  switch (f) {
    case Frame::top:
      return key == "id" ? Field::id : key == "parameters" ? Field::params : key == "inputs" ? Field::inputs
             : key == "outputs" ? Field::outputs : Field::none;
    case Frame::top_params:
      return key == "timeout" ? Field::timeout : key == "binary_data_output" ? Field::binary_data_output : Field::none;
    case Frame::input:
      return key == "name" ? Field::name : key == "datatype" ? Field::datatype : key == "shape" ? Field::shape
             : key == "data" ? Field::data : key == "parameters" ? Field::input_params : Field::none;
    case Frame::input_params:
      return key == "binary_data_size" ? Field::binary_data_size : shm_field(key);
    case Frame::output:
      return key == "name" ? Field::output_name : key == "parameters" ? Field::output_params : Field::none;
    case Frame::output_params:
      return key == "binary_data" ? Field::binary_data : key == "classification" ? Field::classification : shm_field(key);
    default:
      return Field::none;
  }
}

}  // namespace convoy::serve::request_json
