#pragma once
// The `convoy` subcommands: each registers its options on the app and runs when chosen.
#include <functional>

#include <CLI/CLI.hpp>

#include "engine/core/engine_options.h"

namespace convoy::cli {

// The action a chosen subcommand runs, with the tunables main read from the environment
// (engine_options_from_environment); it returns the process exit status.
using Action = std::function<int(const EngineOptions&)>;

// Each registers its subcommand; when that is chosen, parsing stores its action in `chosen`.
void add_train_command(CLI::App& app, Action& chosen);
void add_infer_command(CLI::App& app, Action& chosen);
void add_doctor_command(CLI::App& app, Action& chosen);
void add_bench_command(CLI::App& app, Action& chosen);
void add_info_command(CLI::App& app, Action& chosen);
void add_export_command(CLI::App& app, Action& chosen);
void add_import_command(CLI::App& app, Action& chosen);
void add_serve_command(CLI::App& app, Action& chosen);
void add_quantize_command(CLI::App& app, Action& chosen);

}  // namespace convoy::cli
