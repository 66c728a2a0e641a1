#pragma once
// Shared by the interchange tests: runs tests/interchange/torch_models.py (Debian's python3-torch)
// into a directory and relative errors against its float64 logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "run_command.h"
#include "engine/core/tensor.h"

namespace convoy::testing {

inline std::string torch_python() {
  if (const char* p = std::getenv("CONVOY_PYTHON"); p && *p) return p;
  return std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
}

// Runs the script's `mode` into `dir`; exit 3 (no torch) and 4 (no torchvision) are skips, said
// by the returned text.
inline std::string run_torch_models(const std::string& mode, const std::filesystem::path& dir,
                                    const std::string& extra = "") {
  const CommandResult r = run_command(torch_python() + " " + CONVOY_SOURCE_DIR + "/tests/interchange/torch_models.py " +
                                      mode + " " + dir.string() + " " + extra + " 2>&1");
  if (r.status == 3) return "python3-torch is not installed (apt-get install python3-torch)";
  if (r.status == 4) return "python3-torchvision is not installed (apt-get install python3-torchvision)";
  EXPECT_EQ(r.status, 0) << r.output;
  return "";
}

// max|a - b| / max|b|: Convoy computes in f32, the reference in float64.
inline double relative_error(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  double diff = 0, scale = 0;
  const auto x = a.to_floats(), y = b.to_floats();
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
    diff = std::max(diff, std::abs(double{x[i]} - y[i]));
    scale = std::max(scale, std::abs(double{y[i]}));
  }
  return diff / std::max(scale, 1e-30);
}

}  // namespace convoy::testing
