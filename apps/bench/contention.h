#pragma once
// `convoy bench --contend N`: the suite (Convoy's cases and the peers') beside N busy processes
// that the bench starts itself and stops at the end, so that "CPU inference on shared cores"
// (a laptop running other programs, a pod sharing its cores) is a measurement anyone can repeat
// rather than a state of the machine (issue 39). The processes are plain spin loops: they never
// sleep, so each takes a core's worth of time from whatever shares its core.
#include <sys/types.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace convoy {

// --contend's value: "auto" (one busy process per two usable CPUs, at least one, as issue 39
// measures), or a count from 0 to 4x the usable CPUs. Anything else is an InputError.
int parse_contend(const std::string& text, int usable_cpus);

// The busy processes, from construction to stop() or destruction: the constructor starts them
// (children of this process, on its CPUs), stop() kills and reaps them. They die with this
// process too (PR_SET_PDEATHSIG: a crash or kill -9 of the bench leaves none behind), and each
// ends itself after `max_seconds` (SIGALRM) should this process hang.
class ContendingLoad {
 public:
  ContendingLoad(int processes, unsigned max_seconds);
  ~ContendingLoad();
  ContendingLoad(const ContendingLoad&) = delete;
  ContendingLoad& operator=(const ContendingLoad&) = delete;

  void stop();
  const std::vector<pid_t>& pids() const { return pids_; }

 private:
  std::vector<pid_t> pids_;
};

// The contended cases as a table: each engine's img/s, p50, p99 and p99/p50, Convoy over each
// peer, and the team Convoy's plan ran with at the end; issue 39's bar beneath.
std::string contention_markdown(const nlohmann::json& records, const std::vector<std::string>& peer_engines,
                                int processes, int usable_cpus);

}  // namespace convoy
