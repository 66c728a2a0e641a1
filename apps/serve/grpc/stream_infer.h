#pragma once
// ModelStreamInfer: ModelInfer's requests on one bidirectional stream, Triton's way. Each request
// read is answered by a ModelStreamInferResponse as soon as it finishes, so answers come in the
// order requests finish, each with its request's id; a request that fails is answered with
// error_message (and infer_response holding only the id), and the stream goes on. The stream ends
// with OK once the client has closed its side and every request on it is answered.
//
// The stream itself is on gRPC's callback API, so an open stream holds no thread while it waits
// for requests, and takes its messages as bytes: a request that does not parse is answered with
// an error_message like any other (gRPC's own parsing would end the stream as if the client had
// closed its side). Each request runs ModelInfer's own work on a thread of a pool, where it waits for
// its batch as a unary ModelInfer call waits on one of gRPC's threads; a stream has at most
// kMaxStreamInFlight requests running or answers unsent before it reads more (the client's sends
// then wait on HTTP/2's flow control).
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/proto_utils.h>

#include "kserve_v2.pb.h"

namespace convoy::serve {

inline constexpr size_t kMaxStreamInFlight = 256;  // per stream
inline constexpr size_t kMaxStreamThreads = 1024;  // for all streams: beyond, requests wait for a thread

// Threads made as work needs them, up to a bound, kept once made; work beyond the bound waits its turn.
class WorkPool {
 public:
  explicit WorkPool(size_t max_threads) : max_threads_(max_threads) {}
  ~WorkPool();  // runs the work still queued, then joins
  void post(std::function<void()> work);

 private:
  void run();
  const size_t max_threads_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> work_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

class StreamInfer {
 public:
  using Request = inference::ModelInferRequest;
  using Response = inference::ModelStreamInferResponse;
  // One request's ModelInfer, to its answer (blocking).
  using Infer = std::function<grpc::Status(const Request&, inference::ModelInferResponse&)>;

  explicit StreamInfer(Infer infer) : infer_(std::move(infer)), pool_(kMaxStreamThreads) {}
  // After the gRPC server's shutdown, which waits for every stream to end.
  ~StreamInfer() = default;

  // The reactor of a new ModelStreamInfer call, whose messages are Request and Response
  // serialized (gRPC deletes it when the call is done).
  using Reactor = grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>;
  Reactor* open(grpc::CallbackServerContext* context);
  // Every stream stops reading: an idle one ends now, one with requests running once they are
  // answered, with UNAVAILABLE; later streams end at once. Call before grpc::Server::Shutdown, so
  // that an open stream does not hold the shutdown up to its deadline.
  void shutdown();

 private:
  class Stream;
  void closed(Stream* stream);

  Infer infer_;
  std::mutex mutex_;  // open_, stopping_
  std::set<Stream*> open_;
  bool stopping_ = false;
  WorkPool pool_;  // last: its threads run the streams' requests until it is gone
};

}  // namespace convoy::serve
