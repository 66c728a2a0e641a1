// convoy: train, run and inspect CNNs on GPUs and CPUs.
#include <sysexits.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "cli/environment.h"
#include "engine/core/error.h"
#include "engine/core/usable_cpus.h"

namespace {

// Exit statuses say whose fault a failure is (README, "Exit statuses").
constexpr int kExitInput = 1;              // bad input, or a device or memory the machine lacks
constexpr int kExitUsage = 2;              // the command line is wrong: see --help
constexpr int kExitInternal = EX_SOFTWARE;  // 70: a bug in Convoy

// The command named on the line: the first word that is not an option (--version, --help).
std::string command_of(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (argv[i][0] != '-') return argv[i];
  return "";
}

int input_error(const std::string& what) {
  std::cout.flush();
  std::cerr << "convoy: error: " << what << std::endl;
  return kExitInput;
}

int internal_error(const std::string& what) {
  std::cout.flush();
  std::cerr << "convoy: internal error: " << what << "\n"
            << "convoy: this is a bug in Convoy; please report it with the command you ran and the output of "
               "`convoy --version`"
            << std::endl;
  return kExitInternal;
}

}  // namespace

int main(int argc, char** argv) {
  // A file past the size limit (`ulimit -f`) is a write error OutputFile reports and cleans up
  // after (EFBIG), as a full disk is, not a signal that kills us with a temporary file left.
  std::signal(SIGXFSZ, SIG_IGN);
  // How OpenMP's threads wait between parallel regions; OpenMP reads it when the library
  // loads, before main, hence the one re-exec. OMP_WAIT_POLICY or GOMP_SPINCOUNT in the
  // environment wins.
  // Likewise OpenMP's team size: it counts the CPUs of the affinity mask, not a container's CPU
  // quota (`docker run --cpus`, a Kubernetes limit), which gets OMP_NUM_THREADS where smaller.
  // What it set is listed in CONVOY_OPENMP_SET, for doctor.
  std::string set;
  if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT")) {
    if (const char* spin = convoy::cli::openmp_spin_count(command_of(argc, argv))) {
      setenv("GOMP_SPINCOUNT", spin, 1);
      set += " GOMP_SPINCOUNT";
    } else {
      setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
      set += " OMP_WAIT_POLICY";
    }
  }
  if (!std::getenv("OMP_NUM_THREADS")) {
    const convoy::CpuBudget cpus = convoy::cpu_budget();
    if (cpus.usable() < cpus.affinity) {
      setenv("OMP_NUM_THREADS", std::to_string(cpus.usable()).c_str(), 1);
      set += " OMP_NUM_THREADS";
    }
  }
  if (!set.empty()) {
    const char* before = std::getenv(convoy::cli::kOpenMpSetVariable);
    setenv(convoy::cli::kOpenMpSetVariable, ((before ? before : "") + set).c_str(), 1);
    // The new image's OpenMP finds its CPUs in the mask it starts with: the process's, not the
    // one place this thread is pinned to where OMP_PROC_BIND binds threads.
    const convoy::ProcessCpusScope all_cpus;
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
  convoy::cli::add_info_command(app, chosen);
  convoy::cli::add_export_command(app, chosen);
  convoy::cli::add_import_command(app, chosen);
  convoy::cli::add_serve_command(app, chosen);
  convoy::cli::add_quantize_command(app, chosen);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message (or the help or version); its own codes (106 and the like)
    // tell a script nothing, so every usage error is one status. --help and --version are 0.
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  try {
    return chosen(convoy::cli::engine_options_from_environment());
  } catch (const convoy::InternalError& e) {  // before convoy::Error, from which it derives
    return internal_error(e.what());
  } catch (const convoy::Error& e) {
    return input_error(e.what());
  } catch (const std::bad_alloc&) {
    return input_error("out of memory");
  } catch (const std::exception& e) {
    return internal_error(e.what());
  } catch (...) {
    return internal_error("an exception that is not a std::exception");
  }
}
