// convoy: train, run and inspect CNNs on GPUs and CPUs.
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "cli/commands.h"
#include "engine/core/error.h"

int main(int argc, char** argv) {
  // OpenMP threads that spin while they wait make a loaded machine (a laptop in use, tests
  // side by side) many times slower; the passive policy costs little when the machine is
  // idle. OpenMP reads it when the library loads, before main, hence the one re-exec.
  // OMP_WAIT_POLICY=active in the environment keeps spinning.
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv("/proc/self/exe", argv);  // returns only on failure: then go on as we are
  }
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
