#pragma once
// Shell commands for the benchmark app (git, nvidia-smi, the peers' Python, plot.py). The
// engine runs none: what it needs to know it asks its libraries.
#include <string>

namespace convoy {

struct ShellResult {
  int status = -1;     // the exit status; 128 + N when killed by signal N; -1 when it could not start
  std::string output;  // its stdout, as written (stderr passes through)
};

ShellResult shell_run(const std::string& command);

// `text` as one word for /bin/sh, whatever it holds.
std::string shell_quote(const std::string& text);

}  // namespace convoy
