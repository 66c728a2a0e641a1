#include "apps/serve/http_server.h"

#include <algorithm>
#include <iostream>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "apps/serve/compression.h"
#include "apps/serve/memory_release.h"
#include "engine/core/error.h"
#include "engine/core/usable_cpus.h"

namespace convoy::serve {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

constexpr auto kIdleTimeout = std::chrono::seconds(60);  // a keep-alive connection with no request
constexpr size_t kReadChunk = 65536;  // bytes a read may take at once (Beast reads at most 64 KiB)

struct Shared {
  Shared(Router& r, const HttpOptions& o) : router(r), options(o) {}
  Router& router;
  const HttpOptions& options;
  std::atomic<int64_t> in_flight{0};
  std::atomic<bool> stopping{false};
  std::mutex log_mutex;
};

// One connection: reads a request, hands it to the router, writes the reply, and reads the
// next one while the client keeps the connection alive.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Shared& shared, bool metrics_port)
      : stream_(std::move(socket)), shared_(shared), metrics_port_(metrics_port) {
    // Beast reads at most what the buffer has room for, and an empty flat_buffer offers 512
    // bytes: a 150 KB image took ~300 reads (H200 machine: 33 MB/s per connection, 5 ms a request).
    buffer_.reserve(kReadChunk);
  }

  void start() { net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read(); }); }

 private:
  void read() {
    parser_.emplace();
    parser_->body_limit(shared_.options.max_body_bytes);
    stream_.expires_after(kIdleTimeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    received_ = parser_->get().body().size();
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::operation_aborted ||
        ec == net::error::connection_reset || ec == net::error::eof)
      return close();
    if (ec) {  // a malformed request or one over the body limit: say why, then close
      keep_alive_ = false;
      reply_coding_ = ContentCoding::identity;
      started_ = std::chrono::steady_clock::now();
      shared_.in_flight++;
      const unsigned status = ec == http::error::body_limit ? 413 : 400;
      return write(error_reply(status, "bad HTTP request: " + ec.message()));
    }
    http::request<http::string_body> req = parser_->release();
    keep_alive_ = req.keep_alive() && !shared_.stopping;
    method_ = std::string(req.method_string());
    target_ = std::string(req.target());
    started_ = std::chrono::steady_clock::now();
    shared_.in_flight++;
    const auto accept = req[http::field::accept_encoding];
    reply_coding_ = accepted_coding(std::string_view(accept.data(), accept.size()));
    HttpRequest request;
    request.method = method_;
    request.target = target_;
    // A compressed body is inflated here, so everything after (the binary tensor extension's
    // Inference-Header-Content-Length included) sees the body as sent before compression.
    const auto encoding_header = req[http::field::content_encoding];
    const std::string_view encoding(encoding_header.data(), encoding_header.size());
    const std::optional<ContentCoding> coding = content_coding(encoding);
    if (!coding)
      return write(error_reply(415, "Content-Encoding '" + std::string(encoding) + "' is not supported (gzip, deflate)"));
    if (*coding == ContentCoding::identity) {
      request.body = std::move(req.body());
    } else {
      InflateResult inflated = inflate_body(req.body(), *coding, shared_.options.max_body_bytes);
      received_ += inflated.status == InflateResult::Status::too_large ? shared_.options.max_body_bytes
                                                                        : inflated.body.size();
      if (inflated.status == InflateResult::Status::too_large)
        return write(error_reply(413, std::string("Content-Encoding ") + coding_name(*coding) + ": " + inflated.error +
                                          " (--http-max-input-size)"));
      if (inflated.status == InflateResult::Status::corrupt)
        return write(error_reply(400, std::string("Content-Encoding ") + coding_name(*coding) +
                                          ": the body is not valid " + coding_name(*coding) + " data (" +
                                          inflated.error + ")"));
      request.body = std::move(inflated.body);
    }
    if (auto it = req.find("Inference-Header-Content-Length"); it != req.end()) {
      const std::string v(it->value());
      if (v.empty() || v.size() > 15 || !std::all_of(v.begin(), v.end(), ::isdigit))
        return write(error_reply(400, "Inference-Header-Content-Length must be a byte count, got '" + v + "'"));
      request.inference_header_length = std::stoull(v);
    }
    stream_.expires_never();
    auto reply = [self = shared_from_this()](HttpReply r) {
      net::post(self->stream_.get_executor(), [self, r = std::move(r)]() mutable { self->write(std::move(r)); });
    };
    try {
      if (metrics_port_)
        shared_.router.handle_metrics(request, reply);
      else
        shared_.router.handle(request, reply);
    } catch (const Error& e) {
      reply(error_reply(400, e.what()));
    } catch (const std::bad_alloc&) {
      reply(error_reply(503, "out of memory"));
    } catch (const std::exception& e) {
      reply(error_reply(500, std::string("internal error: ") + e.what()));
    }
  }

  void write(HttpReply r) {
    log(r);
    auto res = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(r.status), 11);
    res->set(http::field::server, "convoy/" CONVOY_VERSION);
    res->set(http::field::content_type, r.content_type);
    if (r.inference_header_length) res->set("Inference-Header-Content-Length", std::to_string(*r.inference_header_length));
    res->keep_alive(keep_alive_ && !shared_.stopping);
    res->set(http::field::vary, "Accept-Encoding");
    if (reply_coding_ != ContentCoding::identity) {
      res->set(http::field::content_encoding, coding_name(reply_coding_));
      res->body() = deflate_body(r.body, reply_coding_);
    } else {
      res->body() = std::move(r.body);
    }
    res->prepare_payload();
    stream_.expires_after(kIdleTimeout);
    http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
      self->shared_.in_flight--;
      release_memory_after_request(self->received_);  // the request's body is freed by now
      if (ec || !res->keep_alive()) return self->close();
      self->read();
    });
  }

  void log(const HttpReply& r) {
    if (!shared_.options.log_requests) return;
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started_);
    nlohmann::json line = {{"method", method_}, {"target", target_}, {"status", r.status},
                           {"duration_us", us.count()}, {"bytes", r.body.size()}};
    if (!r.model.empty()) line["model"] = r.model;
    const std::string text = line.dump() + "\n";
    std::lock_guard lock(shared_.log_mutex);
    std::cout << text << std::flush;
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Shared& shared_;
  bool metrics_port_;
  bool keep_alive_ = false;
  uint64_t received_ = 0;  // the request's body bytes, as received plus inflated
  ContentCoding reply_coding_ = ContentCoding::identity;  // what the request's Accept-Encoding asked for
  std::string method_, target_;
  std::chrono::steady_clock::time_point started_;
};

tcp::acceptor open_acceptor(net::io_context& ioc, const std::string& host, int port) {
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(host, ec);
  if (ec) throw InputError("--host " + host + ": not an IP address");
  tcp::acceptor acceptor(ioc);
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) throw InputError("cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message());
  return acceptor;
}

}  // namespace

// Each I/O thread runs an io_context of its own, and a connection stays on the one it was
// accepted onto: its reads, the reply a model's instance posts back and its writes all run on
// one thread. With one io_context shared by all threads (and a strand per connection) each
// completion of a request's three 64 KiB reads and its write could hop to another thread,
// waking it through the scheduler's lock and epoll's interrupter every time.
struct HttpServer::Impl {
  Impl(Router& router, const HttpOptions& options, std::atomic<bool>& ready)
      : options_(options),
        shared_{router, options_},
        ready_(ready),
        contexts_(make_contexts(options.threads > 0 ? options.threads : std::clamp(usable_cpus(), 2, 8))),
        http_(open_acceptor(main(), options.host, options.http_port)),
        timer_(main()) {
    if (options.metrics_port >= 0) metrics_.emplace(open_acceptor(main(), options.host, options.metrics_port));
    for (auto& c : contexts_) busy_.push_back(net::make_work_guard(*c));
  }

  static std::vector<std::unique_ptr<net::io_context>> make_contexts(int n) {
    std::vector<std::unique_ptr<net::io_context>> contexts;
    for (int i = 0; i < n; ++i) contexts.push_back(std::make_unique<net::io_context>(1));  // 1: one thread runs it
    return contexts;
  }

  // The acceptors, the drain timer and stop requests live on the first thread's context.
  net::io_context& main() { return *contexts_.front(); }

  void accept(tcp::acceptor& acceptor, bool metrics_port) {
    net::io_context& home = *contexts_[next_context_++ % contexts_.size()];
    acceptor.async_accept(home, [this, &acceptor, metrics_port](beast::error_code ec, tcp::socket s) {
      if (ec == net::error::operation_aborted || shared_.stopping) return;
      if (!ec) std::make_shared<Session>(std::move(s), shared_, metrics_port)->start();
      accept(acceptor, metrics_port);
    });
  }

  // After a stop signal (the first; later ones change nothing): no new connections, no
  // keep-alive, not ready; then drain.
  void begin_stop(int signal) {
    if (shared_.stopping.exchange(true)) return;
    std::cerr << "convoy serve: signal " << signal << ": no new requests; finishing the ones in flight" << std::endl;
    ready_ = false;
    beast::error_code ignored;
    http_.close(ignored);
    if (metrics_) metrics_->close(ignored);
    timer_.cancel();
    drain(std::chrono::steady_clock::now() + options_.drain);
  }

  // The requests in flight finish until none is left or the drain time is up.
  void drain(std::chrono::steady_clock::time_point until) {
    if (shared_.in_flight <= 0 || std::chrono::steady_clock::now() >= until) {
      if (shared_.in_flight > 0)
        std::cerr << "convoy serve: " << shared_.in_flight << " request(s) still in flight after "
                  << options_.drain.count() << " s; stopping anyway" << std::endl;
      for (auto& c : contexts_) c->stop();
      return;
    }
    timer_.expires_after(std::chrono::milliseconds(10));
    timer_.async_wait([this, until](beast::error_code) { drain(until); });
  }

  HttpOptions options_;
  Shared shared_;
  std::atomic<bool>& ready_;
  std::vector<std::unique_ptr<net::io_context>> contexts_;  // one per I/O thread
  std::vector<net::executor_work_guard<net::io_context::executor_type>> busy_;  // run() until stopped
  size_t next_context_ = 0;  // round robin over contexts_ for new connections (on main()'s thread)
  tcp::acceptor http_;
  std::optional<tcp::acceptor> metrics_;
  net::steady_timer timer_;
};

HttpServer::HttpServer(Router& router, const HttpOptions& options, std::atomic<bool>& ready)
    : impl_(std::make_unique<Impl>(router, options, ready)) {}
HttpServer::~HttpServer() = default;

int HttpServer::http_port() const { return impl_->http_.local_endpoint().port(); }
int HttpServer::metrics_port() const { return impl_->metrics_ ? impl_->metrics_->local_endpoint().port() : -1; }

void HttpServer::stop(int signal) {
  Impl& s = *impl_;
  net::post(s.main(), [&s, signal] { s.begin_stop(signal); });
}

void HttpServer::run() {
  Impl& s = *impl_;
  s.accept(s.http_, false);
  if (s.metrics_) s.accept(*s.metrics_, true);
  std::vector<std::thread> pool;
  for (size_t i = 1; i < s.contexts_.size(); ++i) pool.emplace_back([&s, i] { s.contexts_[i]->run(); });
  s.main().run();
  for (std::thread& t : pool) t.join();
}

}  // namespace convoy::serve
