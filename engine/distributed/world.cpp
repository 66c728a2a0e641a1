#include "engine/distributed/world.h"

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "engine/core/error.h"

namespace convoy {

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

namespace {

int parse_int(const std::string& name, const std::string& text, int min, int max) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || v < min || v > max)
    throw InputError("environment variable " + name + "='" + text + "': expected an integer in " +
                     std::to_string(min) + " ... " + std::to_string(max));
  return static_cast<int>(v);
}

// The three variables of one launcher's naming, all or none (LOCAL_RANK may be missing: 0).
std::optional<WorldInfo> world_of(const EnvLookup& env, const std::string& rank_var, const std::string& size_var,
                                  const std::string& local_var, const std::string& source) {
  const auto rank = env(rank_var), size = env(size_var), local = env(local_var);
  if (!rank && !size) return std::nullopt;
  if (!rank || !size)
    throw InputError("environment variable " + (rank ? size_var : rank_var) + " is not set but " +
                     (rank ? rank_var : size_var) + " is (" + source + " sets both)");
  WorldInfo w;
  w.source = source;
  w.world_size = parse_int(size_var, *size, 1, 1 << 20);
  w.rank = parse_int(rank_var, *rank, 0, w.world_size - 1);
  w.local_rank = local ? parse_int(local_var, *local, 0, 1 << 16) : 0;
  return w;
}

}  // namespace

WorldInfo world_from_env(const EnvLookup& env) {
  std::optional<WorldInfo> w = world_of(env, "RANK", "WORLD_SIZE", "LOCAL_RANK", "RANK/WORLD_SIZE");
  if (!w) w = world_of(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OpenMPI (mpirun)");
  if (!w) return WorldInfo{};
  // mpirun across hosts: OpenMPI's variables do not say rank 0's host, so pass it along
  // (mpirun -x MASTER_ADDR=host0); on one host the default, this host, is right.
  if (auto addr = env("MASTER_ADDR")) {
    if (addr->empty()) throw InputError("environment variable MASTER_ADDR is empty");
    w->master_addr = *addr;
  }
  if (auto port = env("MASTER_PORT")) w->master_port = parse_int("MASTER_PORT", *port, 1, 65535);
  return *w;
}

}  // namespace convoy
