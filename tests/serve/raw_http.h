#pragma once
// For the serve tests that count milliseconds, descriptors and CPU time: a client on plain
// sockets (curl's process start alone would be most of a health probe's 100 ms), the server's
// CPU time from /proc, and a PNG of any size made cheaply (its rows are zeros, which deflate to
// almost nothing).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>


namespace convoy::testing {

// A blocking socket connected to 127.0.0.1:port; -1 when it cannot connect.
inline int connect_local(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

inline bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Whether the server has closed `fd` (its end of file is waiting), within `wait_ms`.
inline bool closed_by_server(int fd, int wait_ms = 0) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, wait_ms) <= 0) return false;
  char c;
  return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
}

struct RawReply {
  int status = 0;  // 0: no answer within the time
  std::string body;
  double ms = 0;  // from connecting to the reply's last byte
};

// One request on a connection of its own ("Connection: close": the reply ends at end of file).
inline RawReply raw_request(int port, const std::string& method, const std::string& path, const std::string& body = "",
                            int timeout_ms = 10000) {
  RawReply r;
  const auto t0 = std::chrono::steady_clock::now();
  const int fd = connect_local(port);
  if (fd < 0) return r;
  const std::string head = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n";
  std::string reply;
  if (send_all(fd, head) && send_all(fd, body)) {
    const auto until = t0 + std::chrono::milliseconds(timeout_ms);
    char buf[65536];
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      pollfd p{fd, POLLIN, 0};
      if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) {
        reply.clear();  // timed out
        break;
      }
      const ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      reply.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (reply.rfind("HTTP/1.1 ", 0) == 0) r.status = std::stoi(reply.substr(9, 3));
  if (const size_t end = reply.find("\r\n\r\n"); end != std::string::npos) r.body = reply.substr(end + 4);
  return r;
}

// Seconds of CPU the process has used (utime + stime); -1 when it is gone.
inline double cpu_seconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream rest(text.substr(paren + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i)  // fields 14 and 15: utime, stime
    if (i >= 14) ticks += std::stod(field);
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// A width x height PNG of zeros: `depth` 8 or 16 bits, `color` a PNG colour type (2 RGB, 6 RGBA).
inline std::string zero_png(uint32_t width, uint32_t height, int depth, int color) {
  const uint32_t channels = color == 6 ? 4 : color == 2 ? 3 : 1;
  const std::vector<uint8_t> row(1 + static_cast<size_t>(width) * channels * static_cast<uint32_t>(depth / 8), 0);
  z_stream z{};
  deflateInit(&z, 1);
  std::string idat;
  std::vector<uint8_t> out(1 << 16);
  auto pump = [&](int flush) {
    do {
      z.next_out = out.data();
      z.avail_out = static_cast<uInt>(out.size());
      deflate(&z, flush);
      idat.append(reinterpret_cast<char*>(out.data()), out.size() - z.avail_out);
    } while (z.avail_out == 0);
  };
  for (uint32_t y = 0; y < height; ++y) {
    z.next_in = const_cast<uint8_t*>(row.data());
    z.avail_in = static_cast<uInt>(row.size());
    pump(Z_NO_FLUSH);
  }
  pump(Z_FINISH);
  deflateEnd(&z);
  auto be32 = [](uint32_t v) {
    return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
  };
  auto chunk = [&](const std::string& type, const std::string& data) {
    const std::string body = type + data;
    return be32(static_cast<uint32_t>(data.size())) + body +
           be32(static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size()))));
  };
  const std::string ihdr = be32(width) + be32(height) + std::string{static_cast<char>(depth), static_cast<char>(color), 0, 0, 0};
  return std::string("\x89PNG\r\n\x1a\n", 8) + chunk("IHDR", ihdr) + chunk("IDAT", idat) + chunk("IEND", "");
}

}  // namespace convoy::testing
