#include "engine/distributed/launcher.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ostream>

#include "engine/core/error.h"

extern char** environ;

namespace convoy {

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  return env;
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
                                  strsignal(WTERMSIG(status)) + ")";
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

int exit_code(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

}  // namespace

std::vector<std::string> rank_environment(const std::vector<std::string>& env, int rank, int ranks, int master_port) {
  const std::vector<std::pair<std::string, std::string>> set = {
      {"RANK", std::to_string(rank)},          {"LOCAL_RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(ranks)},   {"LOCAL_WORLD_SIZE", std::to_string(ranks)},
      {"MASTER_ADDR", "127.0.0.1"},            {"MASTER_PORT", std::to_string(master_port)}};
  std::vector<std::string> out;
  for (const std::string& e : env) {
    bool replaced = false;
    for (const auto& [name, value] : set) replaced = replaced || e.starts_with(name + "=");
    // OpenMPI's rank variables would name another world (a launcher started under mpirun).
    if (!replaced && !e.starts_with("OMPI_COMM_WORLD_")) out.push_back(e);
  }
  for (const auto& [name, value] : set) out.push_back(name + "=" + value);
  return out;
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw DeviceError(std::string("cannot open a socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw DeviceError(std::string("cannot find a free port: ") + std::strerror(errno));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

int launch_local(const LaunchOptions& options, std::ostream& log) {
  if (options.ranks < 1) throw InputError("--gpus must be at least 1");
  int port = options.master_port;
  if (port == 0) {
    const char* env_port = std::getenv("MASTER_PORT");
    port = env_port ? std::atoi(env_port) : free_port();
    if (port <= 0 || port > 65535) throw InputError(std::string("MASTER_PORT='") + env_port + "' is not a port");
  }
  // The signals are taken synchronously (sigtimedwait), so no handler and no global state; the
  // children get the mask they had before.
  sigset_t watched, previous;
  sigemptyset(&watched);
  sigaddset(&watched, SIGTERM);
  sigaddset(&watched, SIGINT);
  sigaddset(&watched, SIGCHLD);
  sigprocmask(SIG_BLOCK, &watched, &previous);
  const std::vector<std::string> parent_env = current_environment();
  std::vector<pid_t> pids(static_cast<size_t>(options.ranks), -1);
  std::vector<bool> alive(pids.size(), false);
  auto signal_all = [&](int sig) {
    for (size_t r = 0; r < pids.size(); ++r)
      if (alive[r]) ::kill(pids[r], sig);
  };
  for (int r = 0; r < options.ranks; ++r) {
    std::vector<std::string> env = rank_environment(parent_env, r, options.ranks, port);
    std::vector<std::string> args = {options.program};
    args.insert(args.end(), options.args.begin(), options.args.end());
    const pid_t pid = ::fork();
    if (pid < 0) {
      signal_all(SIGKILL);
      sigprocmask(SIG_SETMASK, &previous, nullptr);
      throw DeviceError(std::string("cannot start rank ") + std::to_string(r) + ": " + std::strerror(errno));
    }
    if (pid == 0) {
      sigprocmask(SIG_SETMASK, &previous, nullptr);
      std::vector<char*> argv, envp;
      for (std::string& a : args) argv.push_back(a.data());
      for (std::string& e : env) envp.push_back(e.data());
      argv.push_back(nullptr);
      envp.push_back(nullptr);
      ::execve(options.program.c_str(), argv.data(), envp.data());
      std::_Exit(127);
    }
    pids[static_cast<size_t>(r)] = pid;
    alive[static_cast<size_t>(r)] = true;
  }

  int result = 0;
  int live = options.ranks;
  bool stopping = false;
  Clock::time_point kill_at = Clock::time_point::max();
  while (live > 0) {
    const timespec tick{0, 200 * 1000 * 1000};
    siginfo_t info{};
    const int sig = ::sigtimedwait(&watched, &info, &tick);
    if ((sig == SIGTERM || sig == SIGINT) && !stopping) {
      // A stop for the job: every rank checkpoints (rank 0 writes) and exits cleanly.
      stopping = true;
      result = 128 + sig;
      signal_all(sig);
      kill_at = Clock::now() + std::max(options.grace, std::chrono::milliseconds(60000));
    }
    for (;;) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      for (size_t r = 0; r < pids.size(); ++r) {
        if (pids[r] != pid || !alive[r]) continue;
        alive[r] = false;
        --live;
        const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        if (failed && !stopping && result == 0) {
          result = exit_code(status);
          log << "convoy: rank " << r << " (pid " << pid << ") " << describe_status(status)
              << "; stopping the other ranks" << std::endl;
          stopping = true;
          signal_all(SIGTERM);
          kill_at = Clock::now() + options.grace;
        }
      }
    }
    if (live > 0 && Clock::now() >= kill_at) {
      log << "convoy: ranks still running " << std::chrono::duration_cast<std::chrono::seconds>(options.grace).count()
          << " s after SIGTERM; killing them" << std::endl;
      signal_all(SIGKILL);
      kill_at = Clock::time_point::max();
    }
  }
  sigprocmask(SIG_SETMASK, &previous, nullptr);
  return result;
}

}  // namespace convoy
