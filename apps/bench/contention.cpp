#include "apps/bench/contention.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cmath>
#include <map>
#include <sstream>

#include "apps/bench/bench_report.h"
#include "engine/core/error.h"
#include "engine/core/usable_cpus.h"

namespace convoy {

using nlohmann::json;

int parse_contend(const std::string& text, int usable_cpus) {
  const int cpus = std::max(1, usable_cpus);
  if (text == "auto") return std::max(1, cpus / 2);
  const int most = 4 * cpus;
  const bool digits = !text.empty() && text.size() <= 6 && text.find_first_not_of("0123456789") == std::string::npos;
  const int n = digits ? std::stoi(text) : -1;
  if (n < 0 || n > most)
    throw InputError("--contend: expected 'auto' (one busy process per two of the " + std::to_string(cpus) +
                     " usable CPUs) or a number of busy processes from 0 to " + std::to_string(most) + ", got '" +
                     text + "'");
  return n;
}

namespace {

// The child: only async-signal-safe calls (this process has OpenMP's and oneDNN's threads).
[[noreturn]] void spin_forever(pid_t parent, unsigned max_seconds) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(0);  // the parent died before the line above took effect
  // Holding none of the bench's descriptors: a caller reading its stdout to the end must not
  // wait for the load.
  if (syscall(SYS_close_range, 0U, ~0U, 0) != 0)
    for (int fd = 0; fd < 1024; ++fd) close(fd);
  alarm(max_seconds);
  for (;;) __asm__ volatile("" ::: "memory");  // a loop the compiler keeps
}

}  // namespace

ContendingLoad::ContendingLoad(int processes, unsigned max_seconds) {
  const ProcessCpusScope all_cpus;  // the load may run on every CPU of the process, as the cases do
  const pid_t parent = getpid();
  for (int i = 0; i < processes; ++i) {
    const pid_t pid = fork();
    if (pid == 0) spin_forever(parent, std::max(1U, max_seconds));
    if (pid < 0) {
      const int err = errno;
      stop();
      throw InputError("--contend: cannot start busy process " + std::to_string(i + 1) + " of " +
                       std::to_string(processes) + ": " + std::strerror(err));
    }
    pids_.push_back(pid);
  }
}

ContendingLoad::~ContendingLoad() { stop(); }

void ContendingLoad::stop() {
  for (pid_t pid : pids_) kill(pid, SIGKILL);
  for (pid_t pid : pids_)
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  pids_.clear();
}

namespace {

std::string ratio_cell(double a, double b) {
  return std::isfinite(a) && std::isfinite(b) && b > 0 ? bench_format_fixed(a / b, 2) + "x" : "";
}

// "img/s | p50 | p99 | p99/p50" of one record, or blanks.
std::string engine_cells(const json* r) {
  if (!r || r->value("status", "") != "ok") return " | | | |";
  const double p50 = bench_number(*r, "p50_ms"), p99 = bench_number(*r, "p99_ms");
  std::ostringstream out;  // (GCC 12 warns falsely on the same as string additions)
  out << " " << bench_format_sig(bench_number(*r, "images_per_second")) << " | " << bench_format_sig(p50) << " | "
      << bench_format_sig(p99) << " | " << ratio_cell(p99, p50) << " |";
  return out.str();
}

}  // namespace

std::string contention_markdown(const json& records, const std::vector<std::string>& peer_engines, int processes,
                                int usable_cpus) {
  std::map<std::string, const json*> peers;  // engine#key -> record
  for (const json& r : records)
    if (r.value("engine", "") != "convoy") peers[r.value("engine", "") + "#" + bench_case_key(r)] = &r;
  std::ostringstream md;
  md << "\nUnder contention: " << processes << " busy process" << (processes == 1 ? "" : "es")
     << " (spin loops started by the bench) beside every case, Convoy's and the peers', on " << usable_cpus
     << " usable CPUs:\n\n| model | mode | batch | Convoy img/s | p50 ms | p99 ms | p99/p50 | team at the end |";
  for (const std::string& e : peer_engines)
    md << " " << bench_peer_title(e) << " img/s | p50 ms | p99 ms | p99/p50 | Convoy / " << bench_peer_title(e) << " |";
  md << "\n|---|---|---:|---:|---:|---:|---:|---:|";
  for (size_t i = 0; i < peer_engines.size(); ++i) md << "---:|---:|---:|---:|---:|";
  md << "\n";
  for (const json& r : records) {
    if (r.value("engine", "") != "convoy" || r.value("device", "") != "cpu") continue;
    md << "| " << r.value("model", "") << " | " << r.value("mode", "") << " | " << r.value("batch", 0) << " |"
       << engine_cells(&r) << " "
       << (r.contains("threads_at_end") ? std::to_string(r.value("threads_at_end", 0)) + " of " +
                                              std::to_string(r.value("threads_used", 0))
                                        : std::string(""))
       << " |";
    for (const std::string& e : peer_engines) {
      auto it = peers.find(e + "#" + bench_case_key(r));
      const json* p = it == peers.end() ? nullptr : it->second;
      md << engine_cells(p) << " "
         << (p && p->value("status", "") == "ok" && r.value("status", "") == "ok"
                 ? ratio_cell(bench_number(r, "images_per_second"), bench_number(*p, "images_per_second"))
                 : std::string(""))
         << " |";
    }
    md << "\n";
  }
  md << "\nIssue 39's bar on shared cores: Convoy at >= 0.9x ONNX Runtime's img/s in the same conditions, and "
        "Convoy's p99 <= 3x its p50.\n";
  return md.str();
}

}  // namespace convoy
