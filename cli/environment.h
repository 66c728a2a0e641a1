#pragma once
// The one place below `main` that reads CONVOY_* variables (the README's table "Environment
// variables"); the rest of Convoy gets them as EngineOptions.
#include "engine/core/engine_options.h"

namespace convoy::cli {

// The tunables the environment sets; the defaults where it sets none. A malformed value of a
// variable that takes one (CONVOY_FAULT_INJECT) is an InputError naming it.
EngineOptions engine_options_from_environment();

}  // namespace convoy::cli
