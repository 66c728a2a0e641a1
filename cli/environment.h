#pragma once
// The one place below `main` that reads CONVOY_* variables (the README's table "Environment
// variables"); the rest of Convoy gets them as EngineOptions.
#include <string>

#include "engine/core/engine_options.h"

namespace convoy::cli {

// The tunables the environment sets; the defaults where it sets none. A malformed value of a
// variable that takes one (CONVOY_FAULT_INJECT) is an InputError naming it.
EngineOptions engine_options_from_environment();

// How long OpenMP's threads spin (GOMP_SPINCOUNT) between parallel regions in `command` before
// they sleep, where the environment says nothing; nullptr: they sleep at once (passive). main
// sets it before OpenMP starts; doctor prints it.
const char* openmp_spin_count(const std::string& command);

// The OpenMP variables that main set itself before re-executing (not the user's), listed in
// CONVOY_OPENMP_SET for doctor to tell them apart.
inline constexpr const char* kOpenMpSetVariable = "CONVOY_OPENMP_SET";

}  // namespace convoy::cli
