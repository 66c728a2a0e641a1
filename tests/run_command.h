#pragma once
// Shared by the tests that run the convoy binary: a shell command's exit status and output.
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace convoy::testing {

struct CommandResult {
  int status = -1;     // the exit status; 128 + N when killed by signal N; -1 when it could not start
  std::string output;  // its stdout (redirect stderr into it with 2>&1 where wanted)
};

inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return r;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) r.output.append(buffer, n);
  const int raw = pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  return r;
}

}  // namespace convoy::testing
