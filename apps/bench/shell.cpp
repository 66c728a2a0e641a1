#include "apps/bench/shell.h"

#include <sys/wait.h>

#include <cstdio>

#include "engine/core/usable_cpus.h"

namespace convoy {

ShellResult shell_run(const std::string& command) {
  ShellResult r;
  FILE* pipe = nullptr;
  {
    const ProcessCpusScope all_cpus;  // a peer gets the CPUs Convoy has, under OMP_PROC_BIND too
    pipe = popen(command.c_str(), "r");
  }
  if (!pipe) return r;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) r.output.append(buf, n);
  const int raw = pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  return r;
}

std::string shell_quote(const std::string& text) {
  std::string q = "'";
  for (char ch : text) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

}  // namespace convoy
