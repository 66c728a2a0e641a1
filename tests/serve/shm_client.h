#pragma once
// Shared by the shared-memory tests of `convoy serve`: a POSIX shared-memory object the test owns
// (as a Triton client makes one), a keep-alive HTTP client for loops of thousands of requests (curl
// starts a process each), and what /proc says of the server's memory and descriptors.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace convoy::testing {

// A shared-memory object of `bytes` bytes, created for the test, mapped, and unlinked when it ends.
class PosixShm {
 public:
  explicit PosixShm(size_t bytes) : bytes_(bytes) {
    static std::atomic<int> counter{0};
    key_ = "/convoy_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
    const int fd = shm_open(key_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) throw std::runtime_error("shm_open " + key_ + ": " + std::strerror(errno));
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      close(fd);
      throw std::runtime_error("ftruncate " + key_);
    }
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) throw std::runtime_error("mmap " + key_);
    data_ = static_cast<char*>(p);
  }
  ~PosixShm() {
    munmap(data_, bytes_);
    shm_unlink(key_.c_str());
  }
  PosixShm(const PosixShm&) = delete;
  PosixShm& operator=(const PosixShm&) = delete;
  const std::string& key() const { return key_; }
  char* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  std::string key_;
  char* data_ = nullptr;
  size_t bytes_;
};

// One keep-alive HTTP/1.1 connection to 127.0.0.1:port (Boost.Beast, as the server speaks it).
class KeepAliveClient {
 public:
  explicit KeepAliveClient(int port) : socket_(io_) {
    boost::asio::ip::tcp::endpoint to(boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port));
    socket_.connect(to);
  }
  struct Reply {
    int status = 0;
    std::string body;
    size_t header_length = 0;  // Inference-Header-Content-Length; 0 when absent
  };
  // METHOD target with `body`: JSON, or (header_length > 0) Triton's binary tensor format.
  Reply call(const std::string& method, const std::string& target, const std::string& body = "",
             size_t header_length = 0) {
    namespace http = boost::beast::http;
    http::request<http::string_body> request(http::string_to_verb(method), target, 11);
    request.set(http::field::host, "127.0.0.1");
    request.set(http::field::content_type, header_length ? "application/octet-stream" : "application/json");
    if (header_length) request.set("Inference-Header-Content-Length", std::to_string(header_length));
    request.body() = body;
    request.prepare_payload();
    http::write(socket_, request);
    http::response<http::string_body> response;
    http::read(socket_, buffer_, response);
    Reply r{static_cast<int>(response.result_int()), response.body(), 0};
    if (const auto it = response.find("Inference-Header-Content-Length"); it != response.end())
      r.header_length = std::stoul(std::string(it->value()));
    return r;
  }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
};

// A process's resident memory (VmRSS, kB), its mappings and its open descriptors, from /proc.
inline long resident_kb(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  long kb = -1;
  while (status >> key) {
    if (key == "VmRSS:") {
      status >> kb;
      break;
    }
    status.ignore(4096, '\n');
  }
  return kb;
}
inline long mappings(int pid) {  // lines of /proc/PID/maps: an unmapped region's is gone
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  long n = 0;
  while (std::getline(maps, line)) ++n;
  return n;
}
inline long open_descriptors(int pid) {
  long n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) ++n;
  return n;
}

}  // namespace convoy::testing
