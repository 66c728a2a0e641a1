// convoy bench --suite benchmarks/suites/default.yaml (being written).
#include <iostream>

#include "cli/commands.h"
#include "engine/core/error.h"

namespace convoy::cli {

void add_bench_command(CLI::App& app, Action& chosen) {
  CLI::App* cmd = app.add_subcommand("bench", "Benchmark training and inference, GPU against CPU");
  cmd->callback([&chosen] { chosen = [] () -> int { throw InputError("bench: not built yet"); }; });
}

}  // namespace convoy::cli
