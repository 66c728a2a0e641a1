#include "engine/backends/eight_bit.h"

#include "engine/backends/backend.h"
#include "engine/core/error.h"

namespace convoy {

const char* eight_bit_name(EightBitType type) { return type == EightBitType::int8 ? "int8" : "fp8"; }

float eight_bit_max(EightBitType type) { return type == EightBitType::int8 ? 127.0f : 448.0f; }

std::unique_ptr<CompiledForward> Backend::compile_8bit(const EightBitGraph& graph, int64_t /*batch*/) {
  throw InputError(eight_bit_unsupported_reason(graph.type));
}

}  // namespace convoy
