#pragma once
// Shared by the `convoy serve` tests: the real binary started on 127.0.0.1 with ports the
// kernel picks, curl as the client, and small model repositories built from checkpoints.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "tests/run_command.h"
#include "tests/temp_dir.h"

namespace convoy::testing {

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// `convoy serve --host 127.0.0.1 --http-port 0 --metrics-port 0 --grpc-port 0 ARGS`, its output in files in
// `dir`; stopped (SIGTERM, then SIGKILL after a bound) when destroyed. `shell_prefix` runs first in
// the same shell (e.g. "ulimit -Sn 128; ").
class ServerProcess {
 public:
  ServerProcess(const std::string& args, const std::filesystem::path& dir, const std::string& shell_prefix = "")
      : out_(dir / ("serve" + std::to_string(next_id()) + ".out")), err_(out_.string().substr(0, out_.string().size() - 4) + ".err") {
    const std::string command = shell_prefix + "exec " + CONVOY_BINARY +
                                " serve --host 127.0.0.1 --http-port 0 --metrics-port 0 --grpc-port 0 " + args + " >" +
                                out_.string() + " 2>" + err_.string();
    pid_ = fork();
    if (pid_ == 0) {
      execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    const std::regex ports("HTTP on 127\\.0\\.0\\.1:([0-9]+), metrics on 127\\.0\\.0\\.1:([0-9]+)");
    while (std::chrono::steady_clock::now() < until) {
      std::smatch m;
      const std::string err = read_text(err_);
      if (std::regex_search(err, m, ports)) {
        port_ = std::stoi(m[1]);
        metrics_port_ = std::stoi(m[2]);
        std::smatch g;
        if (std::regex_search(err, g, std::regex("gRPC on 127\\.0\\.0\\.1:([0-9]+)"))) grpc_port_ = std::stoi(g[1]);
        return;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~ServerProcess() { stop(SIGKILL, std::chrono::seconds(10)); }

  bool started() const { return port_ > 0; }
  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  int grpc_port() const { return grpc_port_; }  // -1 when gRPC is not built in
  pid_t pid() const { return pid_; }  // the server's own (sh execs it); -1 once stopped
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
  std::string log() const { return read_text(err_); }
  std::string request_log() const { return read_text(out_); }

  // Sends `sig` and waits up to `bound` for the exit; SIGKILL after that. The exit status, or
  // -1 when it had to be killed.
  int stop(int sig = SIGTERM, std::chrono::seconds bound = std::chrono::seconds(20)) {
    if (pid_ <= 0) return exit_status_;
    kill(pid_, sig);
    const auto until = std::chrono::steady_clock::now() + bound;
    int status = 0;
    while (std::chrono::steady_clock::now() < until) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return exit_status_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    pid_ = -1;
    exit_status_ = -1;
    return -1;
  }
  int exit_status() const { return exit_status_; }

 private:
  static int next_id() {
    static std::atomic<int> id{0};
    return id++;
  }
  std::filesystem::path out_, err_;  // the server's stdout and stderr
  pid_t pid_ = -1;
  int port_ = -1, metrics_port_ = -1, grpc_port_ = -1;
  int exit_status_ = -1;
};

struct HttpResult {
  int status = 0;  // 0: curl failed (no answer)
  std::string body;
  std::string headers;
};

// curl -X METHOD URL with `curl_args` (e.g. "--data-binary @file -H 'X: y'"), bounded in time.
inline HttpResult http(const std::string& method, const std::string& url, const std::string& curl_args,
                       const std::filesystem::path& scratch) {
  static std::atomic<int> counter{0};
  const std::string id = std::to_string(getpid()) + "_" + std::to_string(counter++);
  const std::filesystem::path body = scratch / ("body_" + id), headers = scratch / ("headers_" + id);
  const CommandResult r = run_command("curl -s --max-time 60 -X " + method + " -o " + body.string() + " -D " +
                                      headers.string() + " -w '%{http_code}' " + curl_args + " '" + url + "'");
  HttpResult out;
  try {
    out.status = std::stoi(r.output);
  } catch (const std::exception&) {
    out.status = 0;
  }
  out.body = read_text(body);
  out.headers = read_text(headers);
  std::error_code ec;
  std::filesystem::remove(body, ec);
  std::filesystem::remove(headers, ec);
  return out;
}

}  // namespace convoy::testing
