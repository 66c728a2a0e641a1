// convoy doctor: what this machine offers Convoy (GPU, libraries, CPU, data).
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "datasets/dataset.h"
#include "datasets/nvjpeg.h"
#include "engine/backends/backend.h"

namespace convoy::cli {

namespace {

int run_doctor() {
  std::cout << "convoy " CONVOY_VERSION "\n";
  std::cout << "image decoding: JPEG (libjpeg-turbo), PNG (libpng)\n";
  const std::string no_nvjpeg = nvjpeg_unavailable_reason();
  std::cout << "GPU JPEG decoding: " << (no_nvjpeg.empty() ? "nvJPEG (dataset.decoder: auto or nvjpeg)" : no_nvjpeg)
            << "\n";
  for (const std::string& line : cpu_doctor_lines()) std::cout << line << "\n";
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
  cmd->callback([&chosen] { chosen = [](const EngineOptions&) { return run_doctor(); }; });
}

}  // namespace convoy::cli
