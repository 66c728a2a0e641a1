#include "engine/distributed/rendezvous.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/core/error.h"

namespace convoy {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int32_t kGoodbye = -1;  // after the payload: "I end cleanly"; any rank >= 0: "that rank is gone"
constexpr uint32_t kMaxPayload = 1 << 20;

int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

// Reads n bytes before the deadline; false on timeout, end of stream or error.
bool read_exact(int fd, void* buf, size_t n, Clock::time_point deadline) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    const int r = ::poll(&pfd, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    const ssize_t got = ::recv(fd, p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

bool write_all(int fd, const void* buf, size_t n) {
  const auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    const ssize_t sent = ::send(fd, p, n, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    p += sent;
    n -= static_cast<size_t>(sent);
  }
  return true;
}

bool send_int(int fd, int32_t value) {
  const uint32_t net = htonl(static_cast<uint32_t>(value));
  return write_all(fd, &net, sizeof net);
}

bool read_int(int fd, int32_t& value, Clock::time_point deadline) {
  uint32_t net = 0;
  if (!read_exact(fd, &net, sizeof net, deadline)) return false;
  value = static_cast<int32_t>(ntohl(net));
  return true;
}

std::string endpoint(const WorldInfo& w) { return w.master_addr + ":" + std::to_string(w.master_port); }

// One connection attempt to the master; -1 when it is not there (yet).
int try_connect(const WorldInfo& w, int timeout_ms) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  // A Kubernetes pod's DNS name resolves only once the pod runs: a failure here is retried.
  if (::getaddrinfo(w.master_addr.c_str(), std::to_string(w.master_port).c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);  // bounds connect() on Linux
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

}  // namespace

Rendezvous::Rendezvous(const WorldInfo& world, const std::string& payload, std::chrono::milliseconds timeout)
    : world_(world) {
  const auto deadline = Clock::now() + timeout;
  try {
    if (world_.rank == 0) {
      payload_ = payload;
      serve(deadline);
    } else {
      join(deadline);
    }
  } catch (...) {
    for (int fd : peers_)
      if (fd >= 0) ::close(fd);
    if (listen_fd_ >= 0) ::close(listen_fd_);
    throw;
  }
  done_.assign(peers_.size(), false);
}

void Rendezvous::serve(Clock::time_point deadline) {
  if (payload_.size() > kMaxPayload) throw InternalError("rendezvous payload too large");
  listen_fd_ = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  bool v6 = listen_fd_ >= 0;
  if (!v6) listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw DeviceError(std::string("rendezvous: cannot open a socket: ") + std::strerror(errno));
  const int one = 1, zero = 0;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int bound = -1;
  if (v6) {
    ::setsockopt(listen_fd_, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);  // IPv4 clients too
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(static_cast<uint16_t>(world_.master_port));
    bound = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  } else {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(world_.master_port));
    bound = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  }
  if (bound != 0 || ::listen(listen_fd_, world_.world_size) != 0)
    throw DeviceError("rendezvous: rank 0 cannot listen on port " + std::to_string(world_.master_port) + ": " +
                      std::strerror(errno) + " (another job on it? set MASTER_PORT)");
  peers_.assign(static_cast<size_t>(world_.world_size), -1);
  int joined = 1;
  while (joined < world_.world_size) {
    pollfd pfd{listen_fd_, POLLIN, 0};
    const int r = ::poll(&pfd, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      std::string missing;
      for (int k = 1; k < world_.world_size; ++k)
        if (peers_[k] < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(k);
      throw DeviceError("rendezvous: rank" + std::string(joined + 1 < world_.world_size ? "s " : " ") + missing +
                        " did not join rank 0 on port " + std::to_string(world_.master_port) + " in time (" +
                        std::to_string(joined) + " of " + std::to_string(world_.world_size) + " ranks there)");
    }
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    int32_t rank = -1;
    // A stranger on the port (a health check, a port scan) that says nothing valid is dropped.
    if (!read_int(fd, rank, std::min(deadline, Clock::now() + std::chrono::seconds(5))) || rank < 1 ||
        rank >= world_.world_size || peers_[rank] >= 0) {
      ::close(fd);
      continue;
    }
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    peers_[rank] = fd;
    ++joined;
  }
  ::close(listen_fd_);  // the port is free again once everyone is in
  listen_fd_ = -1;
  for (int k = 1; k < world_.world_size; ++k)
    if (!send_int(peers_[k], static_cast<int32_t>(payload_.size())) || !write_all(peers_[k], payload_.data(), payload_.size()))
      throw DeviceError("rendezvous: rank " + std::to_string(k) + " left before it got the id");
}

void Rendezvous::join(Clock::time_point deadline) {
  int fd = -1;
  while (fd < 0) {
    fd = try_connect(world_, std::max(1, std::min(ms_left(deadline), 2000)));
    if (fd >= 0) break;
    if (ms_left(deadline) == 0)
      throw DeviceError("rendezvous: rank " + std::to_string(world_.rank) + " could not reach rank 0 at " +
                        endpoint(world_) + " in time (is rank 0 running? MASTER_ADDR/MASTER_PORT right?)");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  peers_.assign(1, fd);
  int32_t size = 0;
  if (!send_int(fd, world_.rank) || !read_int(fd, size, deadline) || size < 0 ||
      static_cast<uint32_t>(size) > kMaxPayload)
    throw DeviceError("rendezvous: rank 0 at " + endpoint(world_) + " did not send the id in time (did every rank "
                      "start? rank 0 waits for all " + std::to_string(world_.world_size) + ")");
  payload_.resize(static_cast<size_t>(size));
  if (!read_exact(fd, payload_.data(), payload_.size(), deadline))
    throw DeviceError("rendezvous: rank 0 at " + endpoint(world_) + " broke off while sending the id");
}

Rendezvous::~Rendezvous() {
  stop_ = true;
  if (watcher_.joinable()) watcher_.join();
  for (int fd : peers_)
    if (fd >= 0) ::close(fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void Rendezvous::monitor(std::function<void(int rank)> on_lost) {
  if (watcher_.joinable() || peers_.empty()) return;
  on_lost_ = std::move(on_lost);
  watcher_ = std::thread(&Rendezvous::watch, this);
}

void Rendezvous::goodbye() {
  std::lock_guard lock(send_mutex_);
  if (said_goodbye_) return;
  said_goodbye_ = true;
  for (int fd : peers_)
    if (fd >= 0) send_int(fd, kGoodbye);
}

void Rendezvous::watch() {
  // The rank of the peer behind slot k: rank 0 watches ranks 1..N-1, the others rank 0.
  auto rank_of = [this](size_t k) { return world_.rank == 0 ? static_cast<int>(k) : 0; };
  while (!stop_) {
    std::vector<pollfd> fds;
    std::vector<size_t> slot;
    for (size_t k = 0; k < peers_.size(); ++k)
      if (peers_[k] >= 0 && !done_[k]) {
        fds.push_back({peers_[k], POLLIN, 0});
        slot.push_back(k);
      }
    if (fds.empty()) return;
    const int r = ::poll(fds.data(), fds.size(), 200);
    if (r <= 0) continue;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      const size_t k = slot[i];
      int32_t value = 0;
      const bool got = read_int(peers_[k], value, Clock::now() + std::chrono::seconds(1));
      if (got && value == kGoodbye) {
        done_[k] = true;
        continue;
      }
      done_[k] = true;
      // A worker hears from rank 0 which rank is gone; otherwise the lost one is the peer itself.
      const int lost = got && world_.rank != 0 && value >= 0 ? value : rank_of(k);
      if (world_.rank == 0) {
        std::lock_guard lock(send_mutex_);
        for (size_t j = 0; j < peers_.size(); ++j)
          if (peers_[j] >= 0 && j != k && !done_[j]) send_int(peers_[j], lost);
      }
      if (on_lost_) on_lost_(lost);
      return;  // one failure ends the job
    }
  }
}

}  // namespace convoy
