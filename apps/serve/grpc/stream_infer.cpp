// A stream's reactions (reads and writes done) may run at once on gRPC's threads, and its
// requests finish on the pool's: one mutex guards its state, and gRPC is called after it is
// released (StartRead, StartWrite and Finish never run a reaction inline for a reactor of ours).
#include "apps/serve/grpc/stream_infer.h"

#include <memory>
#include <utility>

namespace convoy::serve {

WorkPool::~WorkPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkPool::post(std::function<void()> work) {
  std::lock_guard lock(mutex_);
  work_.push_back(std::move(work));
  if (idle_ == 0 && threads_.size() < max_threads_)
    threads_.emplace_back([this] { run(); });
  else
    wake_.notify_one();
}

void WorkPool::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    ++idle_;
    wake_.wait(lock, [this] { return stopping_ || !work_.empty(); });
    --idle_;
    if (work_.empty()) return;  // stopping, nothing left
    std::function<void()> work = std::move(work_.front());
    work_.pop_front();
    lock.unlock();
    work();
    lock.lock();
  }
}

class StreamInfer::Stream : public Reactor {
 public:
  Stream(StreamInfer& owner, bool stopping) : owner_(owner) {
    if (stopping) {
      reading_ = false;
      finished_ = true;
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "convoy serve is stopping"));
      return;
    }
    StartRead(&incoming_);
  }

  void OnReadDone(bool ok) override {
    std::unique_lock lock(mutex_);
    if (!ok || finished_) {  // the client closed its side, or the call ended
      reading_ = false;
      return act(lock, maybe_finish());
    }
    auto request = std::make_shared<grpc::ByteBuffer>(std::move(incoming_));
    ++running_;
    owner_.pool_.post([this, request] { run(*request); });
    bool read = !stopping_ && pending() < kMaxStreamInFlight;
    if (!read && stopping_) reading_ = false;
    paused_ = !read && !stopping_;
    lock.unlock();
    if (read) StartRead(&incoming_);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock lock(mutex_);
    unsent_.pop_front();
    writing_ = false;
    if (!ok) {  // the client is gone: answers still to come are dropped
      write_failed_ = true;
      unsent_.clear();
    }
    act(lock, next_step());
  }

  void OnDone() override {
    owner_.closed(this);
    delete this;
  }

  // The server stops: no more reads; the stream ends once what runs is answered.
  void stop() {
    std::unique_lock lock(mutex_);
    stopping_ = true;
    if (paused_) reading_ = paused_ = false;
    act(lock, maybe_finish());
  }

 private:
  enum class Step { none, read, write, finish };

  // One request, on a pool thread: parsed, ModelInfer's work, then its answer queued for writing.
  void run(grpc::ByteBuffer& bytes) {
    Request request;
    Response answer;
    grpc::Status status = grpc::SerializationTraits<Request>::Deserialize(&bytes, &request);
    if (!status.ok())
      status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the message is not a ModelInferRequest that parses");
    else
      status = owner_.infer_(request, *answer.mutable_infer_response());
    if (!status.ok()) {  // Triton's: the error, and the request's id so the client knows which
      answer.Clear();
      answer.set_error_message(status.error_message());
      answer.mutable_infer_response()->set_id(request.id());
    }
    grpc::ByteBuffer out;
    bool own = true;
    grpc::SerializationTraits<Response>::Serialize(answer, &out, &own);
    std::unique_lock lock(mutex_);
    --running_;
    if (!write_failed_) unsent_.push_back(std::move(out));
    act(lock, next_step());
  }

  size_t pending() const { return running_ + unsent_.size(); }

  // What to do next, decided under the lock: write the next answer, read again after a pause,
  // or finish.
  Step next_step() {
    if (!writing_ && !unsent_.empty()) {
      writing_ = true;
      return Step::write;
    }
    if (paused_ && pending() < kMaxStreamInFlight) {
      paused_ = false;
      return Step::read;
    }
    return maybe_finish();
  }

  Step maybe_finish() {
    if (finished_ || (reading_ && !stopping_) || running_ > 0 || writing_ || !unsent_.empty()) return Step::none;
    finished_ = true;
    return Step::finish;
  }

  // Carries out `step` with the lock released.
  void act(std::unique_lock<std::mutex>& lock, Step step) {
    const grpc::ByteBuffer* next = step == Step::write ? &unsent_.front() : nullptr;  // stays put until its OnWriteDone
    const bool stopped = stopping_;
    lock.unlock();
    if (step == Step::read) StartRead(&incoming_);
    if (step == Step::write) StartWrite(next);
    if (step == Step::finish)
      Finish(stopped ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "convoy serve is stopping") : grpc::Status::OK);
  }

  StreamInfer& owner_;
  grpc::ByteBuffer incoming_;  // the read in progress
  std::mutex mutex_;
  std::deque<grpc::ByteBuffer> unsent_;  // answers; the front one is being written while writing_
  size_t running_ = 0;           // requests on the pool
  bool reading_ = true;          // the client may send more
  bool paused_ = false;          // not reading for now: kMaxStreamInFlight pending
  bool writing_ = false;
  bool write_failed_ = false;
  bool stopping_ = false;
  bool finished_ = false;
};

StreamInfer::Reactor* StreamInfer::open(grpc::CallbackServerContext*) {
  std::lock_guard lock(mutex_);
  auto* stream = new Stream(*this, stopping_);
  open_.insert(stream);
  return stream;
}

void StreamInfer::shutdown() {
  // Under the lock, so that no stream is deleted meanwhile: its OnDone waits for it in closed().
  std::lock_guard lock(mutex_);
  stopping_ = true;
  for (Stream* s : open_) s->stop();
}

void StreamInfer::closed(Stream* stream) {
  std::lock_guard lock(mutex_);
  open_.erase(stream);
}

}  // namespace convoy::serve
