// convoy: train, run and inspect CNNs on GPUs and CPUs.
#include <iostream>

#include "cli/commands.h"
#include "engine/core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"Convoy " CONVOY_VERSION ": train convolutional networks on NVIDIA GPUs, run them anywhere"};
  app.set_version_flag("--version", "convoy " CONVOY_VERSION);
  app.require_subcommand(1);
  convoy::cli::Action chosen;
  convoy::cli::add_train_command(app, chosen);
  convoy::cli::add_infer_command(app, chosen);
  convoy::cli::add_doctor_command(app, chosen);
  convoy::cli::add_bench_command(app, chosen);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return chosen();
  } catch (const convoy::Error& e) {
    std::cout.flush();
    std::cerr << "convoy: error: " << e.what() << std::endl;
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "convoy: error: out of memory" << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "convoy: internal error: " << e.what() << std::endl;
    return 2;
  }
}
