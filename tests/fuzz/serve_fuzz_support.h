#pragma once
// Shared by the serve request targets: a shared-memory registry holding one system region, "r"
// (4 KiB, a POSIX shared-memory object of this process, unlinked once mapped), so that inputs
// naming it reach the slice, allocator, read and write paths, and inputs naming others the refusals.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "apps/serve/shared_memory.h"

namespace convoy::fuzz {

inline const serve::SharedMemoryRegistry& serve_registry() {
  static const serve::SharedMemoryRegistry* registry = [] {
    auto* r = new serve::SharedMemoryRegistry;
    const std::string key = "/convoy-fuzz-" + std::to_string(getpid());
    const int fd = shm_open(key.c_str(), O_CREAT | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, 4096) != 0) std::abort();
    close(fd);
    r->register_system("r", key, 0, 4096);
    shm_unlink(key.c_str());
    return r;
  }();
  return *registry;
}

}  // namespace convoy::fuzz
