#pragma once
// `convoy train --gpus N` on one host, as torchrun does it: N child processes of the same
// program, rank k with RANK=k, LOCAL_RANK=k, WORLD_SIZE=N, MASTER_ADDR/MASTER_PORT of a
// rendezvous port on this host; SIGTERM and SIGINT are passed on to every child; when one
// child fails the others are stopped (SIGTERM, then SIGKILL after a grace period) and the
// launcher fails naming the rank.
#include <chrono>
#include <iosfwd>
#include <string>
#include <vector>

namespace convoy {

struct LaunchOptions {
  std::string program;            // the child's executable (this program: /proc/self/exe)
  std::vector<std::string> args;  // the child's arguments after argv[0]
  int ranks = 2;
  int master_port = 0;  // 0: MASTER_PORT from the environment, else a free port of this host
  std::chrono::milliseconds grace{std::chrono::seconds(20)};  // SIGTERM to SIGKILL for the survivors
};

// The environment of rank `rank`'s child: the parent's `env` ("NAME=value" entries) with the
// rank variables set (any the parent had of them replaced; NCCL's and the rest kept as they are).
std::vector<std::string> rank_environment(const std::vector<std::string>& env, int rank, int ranks, int master_port);

// A TCP port of this host that is free now (the kernel's pick).
int free_port();

// Starts the children and waits for them. Returns 0 when every child exited 0; otherwise the
// first failed child's status (128 + signal when killed), after a line to `log` naming its
// rank; 128 + the signal when the launcher itself was told to stop and passed that on.
int launch_local(const LaunchOptions& options, std::ostream& log);

}  // namespace convoy
