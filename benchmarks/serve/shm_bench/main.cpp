// convoy_shm_bench: ResNet-50 (or any served model) inputs through shared memory, as a client on
// the server's host sends them; img/s and p50/p99 latency, in the line benchmarks/serve/load_test.sh
// reads (SERVE requests=... seconds=... non2xx=... errors=... p50_ms=... p99_ms=...).
//   convoy_shm_bench --port P --model M --images B --concurrency N --seconds S [--grpc] [--cuda [--device D]]
// Each request thread has its own connection and its own two regions (its inputs, written once, and
// its outputs), registered before the clock starts and unregistered after it stops.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "benchmarks/serve/shm_bench/shm_bench.h"

namespace convoy::shm_bench {

using json = nlohmann::json;
namespace http = boost::beast::http;

namespace {

class SystemMemory final : public ClientMemory {
 public:
  SystemMemory(const std::string& key, size_t bytes) : key_(key), bytes_(bytes) {
    shm_unlink(key.c_str());  // a run killed before its cleanup left it
    const int fd = shm_open(key.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0)
      throw std::runtime_error("cannot create shared memory " + key + ": " + std::strerror(errno));
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) throw std::runtime_error("cannot map " + key);
    data_ = static_cast<char*>(p);
  }
  ~SystemMemory() override {
    munmap(data_, bytes_);
    shm_unlink(key_.c_str());
  }
  size_t size() const override { return bytes_; }
  void write(size_t offset, const void* data, size_t bytes) override { std::memcpy(data_ + offset, data, bytes); }
  void read(size_t offset, void* data, size_t bytes) const override { std::memcpy(data, data_ + offset, bytes); }
  std::string key() const override { return key_; }
  int device() const override { return -1; }
  std::string ipc_handle() const override { return ""; }

 private:
  std::string key_;
  size_t bytes_;
  char* data_ = nullptr;
};

class HttpConnection final : public Connection {
 public:
  explicit HttpConnection(int port) : socket_(io_) {
    socket_.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
    socket_.set_option(boost::asio::ip::tcp::no_delay(true));
  }
  std::pair<unsigned, std::string> call(http::verb verb, const std::string& target, const std::string& body) {
    http::request<http::string_body> request(verb, target, 11);
    request.set(http::field::host, "127.0.0.1");
    request.set(http::field::content_type, "application/json");
    request.body() = body;
    request.prepare_payload();
    http::write(socket_, request);
    http::response<http::string_body> response;
    http::read(socket_, buffer_, response);
    return {response.result_int(), response.body()};
  }
  void register_region(const std::string& name, const ClientMemory& memory) override {
    const bool cuda = memory.device() >= 0;
    const json body = cuda ? json{{"raw_handle", {{"b64", base64(memory.ipc_handle())}}},
                                  {"device_id", memory.device()}, {"byte_size", memory.size()}}
                           : json{{"key", memory.key()}, {"offset", 0}, {"byte_size", memory.size()}};
    const auto [status, reply] = call(http::verb::post, kind(memory) + "/region/" + name + "/register", body.dump());
    if (status != 200) throw std::runtime_error("register " + name + ": " + reply);
  }
  void unregister_region(const std::string& name, const ClientMemory& memory) override {
    call(http::verb::post, kind(memory) + "/region/" + name + "/unregister", "");
  }
  std::string infer(const InferCall& c) override {
    // The same text every time: made once per call shape.
    if (body_.empty()) {
      const json in = {{"shared_memory_region", c.in}, {"shared_memory_byte_size", c.in_bytes}};
      const json out = {{"shared_memory_region", c.out}, {"shared_memory_byte_size", c.out_bytes}};
      body_ = json{{"inputs", {{{"name", "input"}, {"datatype", "UINT8"},
                                {"shape", {c.images, c.chw[0], c.chw[1], c.chw[2]}}, {"parameters", in}}}},
                   {"outputs", {{{"name", "probabilities"}, {"parameters", out}}}}}
                  .dump();
      target_ = "/v2/models/" + c.model + "/infer";
    }
    const auto [status, reply] = call(http::verb::post, target_, body_);
    return status == 200 ? "" : std::to_string(status) + " " + reply;
  }

 private:
  static std::string kind(const ClientMemory& m) {
    return m.device() >= 0 ? "/v2/cudasharedmemory" : "/v2/systemsharedmemory";
  }
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
  std::string body_, target_;
};

struct Options {
  int port = 8000, grpc_port = 8001, concurrency = 1, device = 0;
  int64_t images = 1;
  double seconds = 10;
  std::string model = "m";
  bool grpc = false, cuda = false;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--port") o.port = std::stoi(next());
    else if (a == "--grpc-port") o.grpc_port = std::stoi(next());
    else if (a == "--model") o.model = next();
    else if (a == "--images") o.images = std::stoll(next());
    else if (a == "--concurrency") o.concurrency = std::stoi(next());
    else if (a == "--seconds") o.seconds = std::stod(next());
    else if (a == "--device") o.device = std::stoi(next());
    else if (a == "--grpc") o.grpc = true;
    else if (a == "--cuda") o.cuda = true;
    else throw std::runtime_error("unknown option " + a);
  }
  if (o.images < 1 || o.concurrency < 1 || o.seconds <= 0) throw std::runtime_error("--images, --concurrency, --seconds > 0");
  return o;
}

int run(const Options& o) {
  // The model's input (C, H, W) and classes, from its metadata over HTTP.
  HttpConnection meta(o.port);
  const auto [status, text] = meta.call(http::verb::get, "/v2/models/" + o.model, "");
  if (status != 200) throw std::runtime_error("model metadata: " + text);
  const json m = json::parse(text);
  InferCall base;
  base.model = o.model;
  base.images = o.images;
  const json& shape = m.at("inputs")[0].at("shape");
  for (int k = 0; k < 3; ++k) base.chw[k] = shape[k + 1].get<int64_t>();
  const int64_t classes = m.at("outputs")[0].at("shape")[1].get<int64_t>();
  base.in_bytes = static_cast<size_t>(o.images * base.chw[0] * base.chw[1] * base.chw[2]);
  base.out_bytes = static_cast<size_t>(o.images * classes) * sizeof(float);

  struct Worker {
    std::unique_ptr<Connection> connection;
    std::unique_ptr<ClientMemory> in, out;
    InferCall call;
    std::vector<double> ms;
    int64_t failed = 0;
    std::string first_error;
  };
  std::vector<Worker> workers(static_cast<size_t>(o.concurrency));
  std::vector<uint8_t> pixels(base.in_bytes);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 131 + i / 7);
  const std::string tag = "convoy_bench_" + std::to_string(getpid()) + "_";
  for (size_t w = 0; w < workers.size(); ++w) {
    Worker& wk = workers[w];
    wk.connection = o.grpc ? connect_grpc(o.grpc_port) : connect_http(o.port);
    const std::string name = tag + std::to_string(w);
    wk.in = o.cuda ? make_cuda_memory(o.device, base.in_bytes) : make_system_memory("/" + name + "_in", base.in_bytes);
    wk.out = o.cuda ? make_cuda_memory(o.device, base.out_bytes) : make_system_memory("/" + name + "_out", base.out_bytes);
    wk.in->write(0, pixels.data(), pixels.size());
    wk.call = base;
    wk.call.in = name + "_in";
    wk.call.out = name + "_out";
    wk.connection->register_region(wk.call.in, *wk.in);
    wk.connection->register_region(wk.call.out, *wk.out);
    if (std::string e = wk.connection->infer(wk.call); !e.empty()) throw std::runtime_error("first request: " + e);
  }

  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  const auto start = std::chrono::steady_clock::now();
  for (Worker& wk : workers)
    threads.emplace_back([&stop, &wk] {
      while (!stop.load(std::memory_order_relaxed)) {
        const auto t0 = std::chrono::steady_clock::now();
        std::string e = wk.connection->infer(wk.call);
        wk.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        if (!e.empty() && wk.failed++ == 0) wk.first_error = e;
      }
    });
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  stop = true;
  for (std::thread& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // Every worker's last outputs: probabilities, each row summing to 1.
  std::vector<double> all;
  int64_t failed = 0;
  bool sums_ok = true;
  std::vector<float> probs(static_cast<size_t>(o.images * classes));
  for (Worker& wk : workers) {
    all.insert(all.end(), wk.ms.begin(), wk.ms.end());
    failed += wk.failed;
    if (!wk.first_error.empty()) std::cerr << "convoy_shm_bench: " << wk.first_error << "\n";
    wk.out->read(0, probs.data(), base.out_bytes);
    for (int64_t r = 0; r < o.images; ++r) {
      double sum = 0;
      for (int64_t c = 0; c < classes; ++c) sum += probs[static_cast<size_t>(r * classes + c)];
      sums_ok = sums_ok && std::fabs(sum - 1.0) < 1e-3;
    }
    wk.connection->unregister_region(wk.call.in, *wk.in);
    wk.connection->unregister_region(wk.call.out, *wk.out);
  }
  std::sort(all.begin(), all.end());
  const auto pct = [&](double q) { return all.empty() ? NAN : all[std::min(all.size() - 1, static_cast<size_t>(q * all.size()))]; };
  std::cerr << "convoy_shm_bench: " << (o.cuda ? "CUDA" : "system") << " shared memory over "
            << (o.grpc ? "gRPC" : "HTTP") << ", " << o.concurrency << " x batch " << o.images << ": "
            << static_cast<double>(all.size()) * static_cast<double>(o.images) / elapsed << " img/s; outputs "
            << (sums_ok ? "checked (each row of probabilities sums to 1)" : "WRONG (a row does not sum to 1)") << "\n";
  std::printf("SERVE requests=%zu seconds=%.3f non2xx=%lld errors=0 p50_ms=%.3f p99_ms=%.3f\n", all.size(), elapsed,
              static_cast<long long>(failed), pct(0.5), pct(0.99));
  return sums_ok && failed == 0 ? 0 : 1;
}

}  // namespace

std::unique_ptr<ClientMemory> make_system_memory(const std::string& key, size_t bytes) {
  return std::make_unique<SystemMemory>(key, bytes);
}

std::unique_ptr<Connection> connect_http(int port) { return std::make_unique<HttpConnection>(port); }

std::string base64(const std::string& bytes) {
  static const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t v = 0;
    for (size_t k = 0; k < 3; ++k) v = v << 8 | (k < n ? static_cast<uint8_t>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? digits[(v >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

}  // namespace convoy::shm_bench

int main(int argc, char** argv) {
  try {
    return convoy::shm_bench::run(convoy::shm_bench::parse(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "convoy_shm_bench: " << e.what() << "\n";
    return 2;
  }
}
