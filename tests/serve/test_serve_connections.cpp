// Connections as a budget: more idle and slowloris connections than --max-connections, and the
// server sheds the oldest to take new ones, so that health probes are answered at once and its
// CPU stays near zero; headers trickled past --http-header-timeout-secs are cut off; and with
// descriptors exhausted (a cap above the open files limit) a failing accept backs off rather
// than spinning.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "tests/serve/raw_http.h"
#include "tests/serve/serve_harness.h"
#include "tests/serve/serve_models.h"

namespace {

namespace fs = std::filesystem;
using namespace convoy::testing;

const std::string kHealth = "/v2/health/live";
const std::string kInfer = R"({"inputs":[{"name":"input","shape":[1,1,28,28],"datatype":"UINT8","data":[)" +
                           [] {
                             std::string d;
                             for (int i = 0; i < 784; ++i) d += (i ? ",7" : "7");
                             return d;
                           }() +
                           "]}]}";

// The value of an unlabelled metric (or one with its labels, e.g. `x{reason="idle"}`); -1 if absent.
double metric(const ServerProcess& s, const std::string& series) {
  const std::string text = raw_request(s.metrics_port(), "GET", "/metrics").body;
  const size_t at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 2));
}

// Opens `count` connections: idle ones send nothing, slow ones the start of a request's headers.
std::vector<int> open_connections(int port, int count, bool slow) {
  std::vector<int> fds;
  for (int i = 0; i < count; ++i) {
    const int fd = connect_local(port);
    if (fd < 0) break;
    if (slow) send_all(fd, "GET /v2/health/live HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ");
    fds.push_back(fd);
  }
  return fds;
}

void close_all(std::vector<int>& fds) {
  for (int fd : fds) close(fd);
  fds.clear();
}

// Probes /v2/health/live every 10 ms for `seconds`; the slowest answer's ms, and how many failed.
struct HealthRun {
  double worst_ms = 0;
  int failures = 0, probes = 0;
  double cpu_percent = 0;  // of one core, the server's, over the run
};
HealthRun probe_health(const ServerProcess& s, double seconds) {
  HealthRun run;
  const double cpu0 = cpu_seconds(s.pid());
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    const RawReply r = raw_request(s.port(), "GET", kHealth, "", 2000);
    run.probes++;
    if (r.status != 200) run.failures++;
    run.worst_ms = std::max(run.worst_ms, r.ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  run.cpu_percent = 100 * (cpu_seconds(s.pid()) - cpu0) / elapsed;
  return run;
}

// Lets this process hold `needed` descriptors (the soft limit raised toward the hard one); false if it cannot.
bool allow_descriptors(rlim_t needed) {
  rlimit l{};
  getrlimit(RLIMIT_NOFILE, &l);
  if (l.rlim_cur >= needed) return true;
  if (l.rlim_max != RLIM_INFINITY && l.rlim_max < needed) return false;
  l.rlim_cur = needed;
  return setrlimit(RLIMIT_NOFILE, &l) == 0;
}

class ServeConnections : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!allow_descriptors(1024)) GTEST_SKIP() << "cannot hold 1024 descriptors (ulimit -Hn)";
    write_tiny_repository(repo());
  }
  fs::path repo() const { return dir_.path() / "repo"; }
  std::string repo_arg() const { return "--model-repository " + repo().string() + " "; }
  TempDir dir_{"convoy-serve-conns"};
};

TEST_F(ServeConnections, PastTheCapTheOldestAreShedAndHealthStaysFast) {
  ServerProcess server(repo_arg() + "--max-connections 32 --http-header-timeout-secs 60", dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  EXPECT_NE(server.log().find("at most 32 HTTP connections"), std::string::npos) << server.log();
  std::vector<int> idle = open_connections(server.port(), 100, false);
  std::vector<int> slow = open_connections(server.port(), 50, true);
  ASSERT_EQ(idle.size(), 100u);
  ASSERT_EQ(slow.size(), 50u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the server takes them all in

  const HealthRun run = probe_health(server, 2.0);
  EXPECT_EQ(run.failures, 0) << run.probes << " probes";
  EXPECT_LT(run.worst_ms, 100.0);
  EXPECT_LT(run.cpu_percent, 10.0);
  const RawReply infer = raw_request(server.port(), "POST", "/v2/models/tiny/infer", kInfer);
  EXPECT_EQ(infer.status, 200) << infer.body;

  // The first ones opened were shed (the server closed them); the newest slow ones are still open.
  EXPECT_TRUE(closed_by_server(idle.front(), 1000));
  EXPECT_FALSE(closed_by_server(slow.back()));
  EXPECT_LE(metric(server, "convoy_http_connections"), 32);
  EXPECT_EQ(metric(server, "convoy_http_connections_max"), 32);
  EXPECT_GE(metric(server, "convoy_http_connections_shed_total{reason=\"idle\"}"), 100);
  EXPECT_GE(metric(server, "convoy_http_connections_shed_total{reason=\"slow\"}"), 1);
  EXPECT_EQ(metric(server, "convoy_http_accept_errors_total"), 0);
  std::cout << "health: " << run.probes << " probes, slowest " << run.worst_ms << " ms; server CPU "
            << run.cpu_percent << "% of a core\n";
  close_all(idle);
  close_all(slow);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST_F(ServeConnections, HeadersNotCompleteInTimeAreCutOffIdleOnesWait) {
  ServerProcess server(repo_arg() + "--http-header-timeout-secs 1", dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  std::vector<int> slow = open_connections(server.port(), 5, true);
  std::vector<int> idle = open_connections(server.port(), 5, false);
  std::this_thread::sleep_for(std::chrono::milliseconds(1600));
  for (int fd : slow) EXPECT_TRUE(closed_by_server(fd, 500));
  for (int fd : idle) EXPECT_FALSE(closed_by_server(fd));  // the keep-alive idle timeout is 60 s
  EXPECT_EQ(metric(server, "convoy_http_header_timeouts_total"), 5);
  EXPECT_EQ(metric(server, "convoy_http_connections_shed_total{reason=\"slow\"}"), 0);
  // A request completed in time on an idle connection is answered.
  ASSERT_TRUE(send_all(idle.front(), "GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  char buf[256] = {};
  ASSERT_GT(recv(idle.front(), buf, sizeof buf - 1, 0), 12);
  EXPECT_EQ(std::string(buf).substr(0, 12), "HTTP/1.1 200");
  close_all(idle);
  close_all(slow);
}

TEST_F(ServeConnections, OutOfDescriptorsAcceptBacksOffAndShedsInsteadOfSpinning) {
#if defined(__SANITIZE_ADDRESS__)  // scripts/test-sanitizers.sh: ASan and UBSan together
  // UBSan's vptr check tests memory through a pipe of its own (IsAccessibleMemoryRange), which a
  // process out of descriptors cannot open: it reports every virtual call as a bad one.
  GTEST_SKIP() << "under the sanitizers a process out of descriptors gets false UBSan vptr reports";
#endif
  // A cap far above what 128 descriptors allow: accept itself fails (EMFILE).
  ServerProcess server(repo_arg() + "--max-connections 5000", dir_.path(), "ulimit -Sn 128; ");
  ASSERT_TRUE(server.started()) << server.log();
  std::vector<int> idle = open_connections(server.port(), 300, false);
  ASSERT_EQ(idle.size(), 300u);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));

  const HealthRun run = probe_health(server, 2.0);
  EXPECT_EQ(run.failures, 0) << run.probes << " probes";
  EXPECT_LT(run.worst_ms, 100.0);
  EXPECT_LT(run.cpu_percent, 10.0);
  EXPECT_GT(metric(server, "convoy_http_accept_errors_total"), 0);
  EXPECT_NE(server.log().find("accept failed (Too many open files)"), std::string::npos) << server.log();
  EXPECT_EQ(raw_request(server.port(), "POST", "/v2/models/tiny/infer", kInfer).status, 200);
  std::cout << "health: " << run.probes << " probes, slowest " << run.worst_ms << " ms; server CPU "
            << run.cpu_percent << "% of a core\n";
  close_all(idle);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST_F(ServeConnections, TheDefaultCapFollowsTheOpenFilesLimit) {
  ServerProcess server(repo_arg(), dir_.path(), "ulimit -Sn 256; ");
  ASSERT_TRUE(server.started()) << server.log();
  // 256 - 64 - 256 / 4: room left for the process's own files and gRPC's connections.
  EXPECT_NE(server.log().find("at most 128 HTTP connections"), std::string::npos) << server.log();
  std::vector<int> idle = open_connections(server.port(), 600, false);
  ASSERT_EQ(idle.size(), 600u);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const HealthRun run = probe_health(server, 1.0);
  EXPECT_EQ(run.failures, 0);
  EXPECT_LT(run.worst_ms, 100.0);
  EXPECT_EQ(metric(server, "convoy_http_accept_errors_total"), 0);  // the cap, not the kernel, said no
  close_all(idle);
}

}  // namespace
