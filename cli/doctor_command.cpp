// convoy doctor: what this machine offers Convoy (GPU, libraries, CPU, data).
#include <omp.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/environment.h"
#include "datasets/dataset.h"
#include "datasets/nvjpeg.h"
#include "engine/backends/backend.h"
#include "engine/core/usable_cpus.h"

namespace convoy::cli {

namespace {

bool set_by_convoy(const std::string& variable) {
  const char* set = std::getenv(kOpenMpSetVariable);
  return set && (" " + std::string(set) + " ").find(" " + variable + " ") != std::string::npos;
}

std::string quota_text(double quota) {
  std::ostringstream q;
  q << quota;
  return q.str();
}

// How many threads CPU work uses and why, how they wait, and how inference passes adapt their
// team where other processes compete for the cores (issue 39).
std::vector<std::string> cpu_thread_lines(const EngineOptions& engine) {
  std::vector<std::string> lines;
  const CpuBudget cpus = cpu_budget();
  const int threads = omp_get_max_threads();
  const char* omp_threads = std::getenv("OMP_NUM_THREADS");
  std::string why;
  if (omp_threads && !set_by_convoy("OMP_NUM_THREADS"))
    why = "OMP_NUM_THREADS=" + std::string(omp_threads) + " from the environment (it wins over the CPUs found)";
  else if (cpus.quota && cpus.usable() < cpus.affinity)
    why = "the cgroup's CPU quota of " + quota_text(*cpus.quota) + " CPUs, rounded down, below the " +
          std::to_string(cpus.affinity) + " CPUs of the affinity mask (Convoy set OMP_NUM_THREADS)";
  else
    why = "the " + std::to_string(cpus.affinity) + " CPUs of this process's affinity mask" +
          (cpus.quota ? " (the CPU quota of " + quota_text(*cpus.quota) + " allows as many)" : ", no CPU quota");
  lines.push_back("CPU threads, why: " + std::to_string(threads) + ": " + why +
                  "; `--threads N` (infer, bench, serve) or OMP_NUM_THREADS sets it");
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  if ((policy && !set_by_convoy("OMP_WAIT_POLICY")) || (spin && !set_by_convoy("GOMP_SPINCOUNT"))) {
    lines.push_back(std::string("OpenMP wait: from the environment:") +
                    (policy ? " OMP_WAIT_POLICY=" + std::string(policy) : "") +
                    (spin ? " GOMP_SPINCOUNT=" + std::string(spin) : ""));
  } else {
    lines.push_back(std::string("OpenMP wait: threads spin ") + openmp_spin_count("infer") +
                    " pauses between parallel regions in infer and bench, " + openmp_spin_count("serve") +
                    " in serve, none in train (they sleep at once); OMP_WAIT_POLICY or GOMP_SPINCOUNT sets it");
  }
  lines.push_back(
      engine.adaptive_team
          ? "CPU inference team: all " + std::to_string(threads) +
                " threads while the cores are free; where other processes take them (preemptions, passes that "
                "vary), a plan tries half the team, down to 1, and keeps whichever runs faster, trying the larger "
                "again now and then; a `--threads N` given keeps N, CONVOY_ADAPTIVE_TEAM=0 keeps all"
          : "CPU inference team: all " + std::to_string(threads) + " threads always (CONVOY_ADAPTIVE_TEAM=0)");
  return lines;
}

int run_doctor(const EngineOptions& engine) {
  std::cout << "convoy " CONVOY_VERSION "\n";
  std::cout << "image decoding: JPEG (libjpeg-turbo), PNG (libpng)\n";
  const std::string no_nvjpeg = nvjpeg_unavailable_reason();
  std::cout << "GPU JPEG decoding: " << (no_nvjpeg.empty() ? "nvJPEG (dataset.decoder: auto or nvjpeg)" : no_nvjpeg)
            << "\n";
  for (const std::string& line : cpu_doctor_lines()) std::cout << line << "\n";
  for (const std::string& line : cpu_thread_lines(engine)) std::cout << line << "\n";
  for (const std::string& line : cuda_doctor_lines()) std::cout << line << "\n";
  const std::string why = cuda_unavailable_reason();
  std::cout << "device auto: " << (why.empty() ? "cuda:0" : "cpu (" + why + ")") << "\n";
  const std::filesystem::path fmnist(kFashionMnistDefaultPath);
  std::cout << "fashion-mnist: "
            << (std::filesystem::exists(fmnist) ? fmnist.string()
                                                 : "not found at " + fmnist.string() +
                                                       " (apt-get install dataset-fashion-mnist)")
            << "\n";
  return 0;
}

}  // namespace

void add_doctor_command(CLI::App& app, Action& chosen) {
  CLI::App* cmd = app.add_subcommand("doctor", "Show the GPUs, libraries and data Convoy finds here");
  cmd->callback([&chosen] { chosen = [](const EngineOptions& engine) { return run_doctor(engine); }; });
}

}  // namespace convoy::cli
