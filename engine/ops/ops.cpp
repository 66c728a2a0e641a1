#include "engine/ops/ops.h"

namespace convoy {

const char* op_name(OpKind op) {
  switch (op) {
#define CONVOY_OP_NAME(name) \
  case OpKind::name: return #name;
    CONVOY_OPS(CONVOY_OP_NAME)
#undef CONVOY_OP_NAME
  }
  return "?";  // unreachable: the switch is exhaustive (-Werror=switch)
}

}  // namespace convoy
