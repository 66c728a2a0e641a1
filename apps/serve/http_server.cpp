#include "apps/serve/http_server.h"

#include <algorithm>
#include <cerrno>
#include <iostream>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "apps/serve/compression.h"
#include "apps/serve/connection_table.h"
#include "engine/core/error.h"
#include "engine/core/usable_cpus.h"

namespace convoy::serve {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

// A keep-alive connection's wait for its next request; also the bound on reading a request's
// body and writing its reply.
constexpr auto kIdleTimeout = std::chrono::seconds(60);
constexpr size_t kReadChunk = 65536;  // bytes a read may take at once (Beast reads at most 64 KiB)
// A failing accept (out of descriptors) is retried after this, doubling to the second while it fails.
constexpr auto kAcceptBackoff = std::chrono::milliseconds(10);
constexpr auto kAcceptBackoffMax = std::chrono::milliseconds(100);

struct Shared {
  Shared(Router& r, const HttpOptions& o)
      : router(r), options(o), metrics(r.metrics().server()),
        connections(o.max_connections > 0 ? o.max_connections : default_max_connections(), metrics) {}
  Router& router;
  const HttpOptions& options;
  ServerMetrics& metrics;
  ConnectionTable connections;
  std::atomic<int64_t> in_flight{0};
  std::atomic<bool> stopping{false};
};

using Response = std::shared_ptr<http::response<http::string_body>>;

// One connection: reads a request, hands it to the router, writes the reply, and reads the
// next one while the client keeps the connection alive. Its phase tells the connection table
// whether it may be shed to make room.
class Session : public TrackedConnection, public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Shared& shared, bool metrics_port)
      : stream_(std::move(socket)), shared_(shared), metrics_port_(metrics_port) {
    // Beast reads at most what the buffer has room for, and an empty flat_buffer offers 512
    // bytes: a 150 KB image took ~300 reads (H200 machine: 33 MB/s per connection, 5 ms a request).
    buffer_.reserve(kReadChunk);
  }
  ~Session() override { shared_.connections.remove(this); }

  void start() { net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read(); }); }

  void shed() override {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      beast::error_code ignored;
      self->stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
      self->stream_.close();  // what is pending ends with operation_aborted, and the session with it
    });
  }

 private:
  // Waits (up to the idle timeout) for the next request's first bytes, unless they are here.
  void read() {
    parser_.emplace();
    parser_->body_limit(shared_.options.max_body_bytes);
    if (buffer_.size() > 0) return read_header();
    set_phase(ConnectionPhase::idle);
    stream_.expires_after(kIdleTimeout);
    stream_.async_read_some(buffer_.prepare(kReadChunk), [self = shared_from_this()](beast::error_code ec, size_t n) {
      if (ec) return self->close();
      self->buffer_.commit(n);
      self->read_header();
    });
  }

  // From a request's first byte its headers have header_timeout to arrive (a slowloris client
  // sends them a byte at a time to hold the connection), the body then kIdleTimeout.
  void read_header() {
    set_phase(ConnectionPhase::reading);
    stream_.expires_after(shared_.options.header_timeout);
    http::async_read_header(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec == beast::error::timeout) {
        self->shared_.metrics.header_timeouts++;
        return self->close();
      }
      if (ec || self->parser_->is_done()) return self->on_read(ec);
      self->stream_.expires_after(kIdleTimeout);
      http::async_read(self->stream_, self->buffer_, *self->parser_,
                       [self](beast::error_code ec2, size_t) { self->on_read(ec2); });
    });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::operation_aborted ||
        ec == net::error::connection_reset || ec == net::error::eof)
      return close();
    set_phase(ConnectionPhase::busy);
    stream_.expires_never();
    started_ = std::chrono::steady_clock::now();
    shared_.in_flight++;
    if (ec) {  // a malformed request or one over the body limit: say why, then close
      keep_alive_ = false;
      reply_coding_ = ContentCoding::identity;
      const unsigned status = ec == http::error::body_limit ? 413 : 400;
      return send(respond(error_reply(status, "bad HTTP request: " + ec.message())));
    }
    http::request<http::string_body> req = parser_->release();
    keep_alive_ = req.keep_alive() && !shared_.stopping;
    method_ = std::string(req.method_string());
    target_ = std::string(req.target());
    const auto accept = req[http::field::accept_encoding];
    reply_coding_ = accepted_coding(std::string_view(accept.data(), accept.size()));
    HttpRequest request;
    request.method = method_;
    request.target = target_;
    const auto encoding_header = req[http::field::content_encoding];
    const std::string_view encoding(encoding_header.data(), encoding_header.size());
    const std::optional<ContentCoding> coding = content_coding(encoding);
    if (!coding)
      return send(respond(error_reply(415, "Content-Encoding '" + std::string(encoding) + "' is not supported (gzip, deflate)")));
    if (auto it = req.find("Inference-Header-Content-Length"); it != req.end()) {
      const std::string v(it->value());
      if (v.empty() || v.size() > 15 || !std::all_of(v.begin(), v.end(), ::isdigit))
        return send(respond(error_reply(400, "Inference-Header-Content-Length must be a byte count, got '" + v + "'")));
      request.inference_header_length = std::stoull(v);
    }
    request.release.add(req.body().size());
    request.body = std::move(req.body());
    const ReplyFn reply = replier();
    if (metrics_port_) return answer_errors(reply, [&] { shared_.router.handle_metrics(request, reply); });
    WorkerPool* workers = shared_.router.workers();
    if (*coding == ContentCoding::identity || request.body.empty() || !workers)
      return answer_errors(reply, [&] { handle(std::move(request), *coding, reply); });
    // Inflating is heavy work: a worker's, as is what the router then does with the body.
    auto work = [self = shared_from_this(), request = std::move(request), coding = *coding, reply]() mutable {
      answer_errors(reply, [&] { self->handle(std::move(request), coding, reply); });
    };
    if (!workers->try_submit(std::move(work))) reply(workers_busy_reply(*workers));
  }

  // A compressed body is inflated here, so everything after (the binary tensor extension's
  // Inference-Header-Content-Length included) sees the body as sent before compression.
  void handle(HttpRequest request, ContentCoding coding, const ReplyFn& reply) {
    if (coding != ContentCoding::identity) {
      InflateResult inflated = inflate_body(request.body, coding, shared_.options.max_body_bytes);
      request.release.add(inflated.status == InflateResult::Status::too_large ? shared_.options.max_body_bytes
                                                                               : inflated.body.size());
      if (inflated.status == InflateResult::Status::too_large)
        return reply(error_reply(413, std::string("Content-Encoding ") + coding_name(coding) + ": " + inflated.error +
                                          " (--http-max-input-size)"));
      if (inflated.status == InflateResult::Status::corrupt)
        return reply(error_reply(400, std::string("Content-Encoding ") + coding_name(coding) +
                                          ": the body is not valid " + coding_name(coding) + " data (" +
                                          inflated.error + ")"));
      request.body = std::move(inflated.body);
    }
    shared_.router.handle(std::move(request), reply);
  }

  // Answers from any thread: the reply is built (and compressed) on the caller's, a worker for a
  // heavy request, and only written on the connection's.
  ReplyFn replier() {
    return [self = shared_from_this()](HttpReply r) {
      Response res = self->respond(std::move(r));
      net::post(self->stream_.get_executor(), [self, res = std::move(res)] { self->send(res); });
    };
  }

  // Reads only what stays fixed while the request is handled.
  Response respond(HttpReply r) {
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
    return res;
  }

  void send(const Response& res) {
    set_phase(ConnectionPhase::writing);
    stream_.expires_after(kIdleTimeout);
    http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
      self->shared_.in_flight--;
      if (ec || !res->keep_alive()) return self->close();
      self->read();
    });
  }

  void log(const HttpReply& r) {
    if (!shared_.options.log || !shared_.options.log->verbose(1)) return;
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started_);
    nlohmann::json line = {{"method", method_}, {"target", target_}, {"status", r.status},
                           {"duration_us", us.count()}, {"bytes", r.body.size()}};
    if (!r.model.empty()) line["model"] = r.model;
    shared_.options.log->request_line(line.dump());
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

// A listening socket and the timer that backs off its failing accepts.
struct Listener {
  Listener(tcp::acceptor a, bool metrics) : acceptor(std::move(a)), timer(acceptor.get_executor()), metrics_port(metrics) {}
  tcp::acceptor acceptor;
  net::steady_timer timer;
  bool metrics_port;
  std::chrono::milliseconds backoff = kAcceptBackoff;
  std::chrono::steady_clock::time_point logged;  // the last accept failure logged
};

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
        http_(open_acceptor(main(), options.host, options.http_port), false),
        timer_(main()) {
    if (options.metrics_port >= 0) metrics_.emplace(open_acceptor(main(), options.host, options.metrics_port), true);
    for (auto& c : contexts_) busy_.push_back(net::make_work_guard(*c));
  }

  static std::vector<std::unique_ptr<net::io_context>> make_contexts(int n) {
    std::vector<std::unique_ptr<net::io_context>> contexts;
    for (int i = 0; i < n; ++i) contexts.push_back(std::make_unique<net::io_context>(1));  // 1: one thread runs it
    return contexts;
  }

  // The acceptors, the drain timer and stop requests live on the first thread's context.
  net::io_context& main() { return *contexts_.front(); }

  void accept(Listener& l) {
    net::io_context& home = *contexts_[next_context_++ % contexts_.size()];
    l.acceptor.async_accept(home, [this, &l](beast::error_code ec, tcp::socket s) {
      if (ec == net::error::operation_aborted || shared_.stopping) return;
      if (ec) return accept_failed(l, ec);
      l.backoff = kAcceptBackoff;
      auto session = std::make_shared<Session>(std::move(s), shared_, l.metrics_port);
      // At the cap another connection makes room; with every one busy this one is closed.
      if (shared_.connections.admit(session)) session->start();
      accept(l);
    });
  }

  // The connection accept() could not take stays queued and the listening socket readable: an
  // accept retried at once fails at once, a spin. Out of descriptors, shedding a connection
  // frees one for it; otherwise (or with none to shed) the retry waits, longer while it fails.
  void accept_failed(Listener& l, beast::error_code ec) {
    shared_.metrics.accept_errors++;
    const auto now = std::chrono::steady_clock::now();
    if (now - l.logged > std::chrono::seconds(10)) {  // a line per episode, not per connection
      l.logged = now;
      std::cerr << "convoy serve: accept failed (" << ec.message() << "); backing off"
                << (ec == net::error::no_descriptors ? ", closing idle connections for new ones (raise ulimit -n or "
                                                       "lower --max-connections)"
                                                     : "")
                << std::endl;
    }
    const bool resources = ec == net::error::no_descriptors || ec.value() == ENFILE || ec == net::error::no_buffer_space ||
                           ec == net::error::no_memory;
    std::chrono::milliseconds wait = l.backoff;
    if (resources && shared_.connections.shed_one())
      wait = std::chrono::milliseconds(1);  // the shed connection closes on its own thread first
    l.backoff = std::min(l.backoff * 2, kAcceptBackoffMax);
    l.timer.expires_after(wait);
    l.timer.async_wait([this, &l](beast::error_code e) {
      if (e || shared_.stopping) return;
      accept(l);
    });
  }

  // After a stop signal (the first; later ones change nothing): no new connections, no
  // keep-alive, not ready; then drain.
  void begin_stop(int signal) {
    if (shared_.stopping.exchange(true)) return;
    std::cerr << "convoy serve: signal " << signal << ": no new requests; finishing the ones in flight" << std::endl;
    ready_ = false;
    beast::error_code ignored;
    for (Listener* l : {&http_, metrics_ ? &*metrics_ : nullptr}) {
      if (!l) continue;
      l->acceptor.close(ignored);
      l->timer.cancel();
    }
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
  Listener http_;
  std::optional<Listener> metrics_;
  net::steady_timer timer_;
};

HttpServer::HttpServer(Router& router, const HttpOptions& options, std::atomic<bool>& ready)
    : impl_(std::make_unique<Impl>(router, options, ready)) {}
HttpServer::~HttpServer() = default;

int HttpServer::http_port() const { return impl_->http_.acceptor.local_endpoint().port(); }
int HttpServer::metrics_port() const { return impl_->metrics_ ? impl_->metrics_->acceptor.local_endpoint().port() : -1; }
int64_t HttpServer::max_connections() const { return impl_->shared_.metrics.max_connections; }

void HttpServer::stop(int signal) {
  Impl& s = *impl_;
  net::post(s.main(), [&s, signal] { s.begin_stop(signal); });
}

void HttpServer::run() {
  Impl& s = *impl_;
  s.accept(s.http_);
  if (s.metrics_) s.accept(*s.metrics_);
  std::vector<std::thread> pool;
  for (size_t i = 1; i < s.contexts_.size(); ++i) pool.emplace_back([&s, i] { s.contexts_[i]->run(); });
  s.main().run();
  for (std::thread& t : pool) t.join();
}

}  // namespace convoy::serve
