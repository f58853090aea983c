// The server side of a Session stream (internal.proto), shared by the draft
// and target services: a grpc::ServerBidiReactor that only forwards what it
// reads to a SessionSink (which enqueues for the scheduler thread) and writes
// what the scheduler sends through a StreamHandle. No callback here blocks
// (docs/style.md "gRPC services": per-call state in the reactor, never block in a callback).
//
// Life of a stream: the first message must be `open`; the sink admits or
// refuses it at once. Every later message goes to the sink in order. The
// end of the stream for any reason (a `close` message, the client's
// half-close, cancellation, a dead peer) calls SessionSink::OnEnd, after
// which the scheduler frees the session and calls StreamHandle::Finish.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace specserve::rpc {

template <class Resp>
class StreamHandle;

// What a service implements to receive a stream's messages. Called on gRPC
// threads: implementations only check cheap things and enqueue.
template <class Req, class Resp>
class SessionSink {
 public:
  virtual ~SessionSink() = default;
  // The first message. A non-OK status ends the stream with it at once
  // (INVALID_ARGUMENT, RESOURCE_EXHAUSTED, UNAVAILABLE while draining).
  virtual grpc::Status OnOpen(uint64_t id, const Req& first, std::shared_ptr<StreamHandle<Resp>> handle) = 0;
  virtual void OnMessage(uint64_t id, Req msg) = 0;
  // The stream is over (called at least once after a successful OnOpen,
  // possibly more: must be idempotent). `cancelled`: by the client, its
  // deadline or a dead peer rather than a close.
  virtual void OnEnd(uint64_t id, bool cancelled) = 0;
};

// The scheduler's way to answer: thread-safe, never blocks, and a no-op once
// the stream is gone (the reactor may be deleted while the scheduler still
// holds the handle).
template <class Resp>
class StreamHandle {
 public:
  struct Writer {  // the reactor, as the handle sees it
    virtual ~Writer() = default;
    virtual void DoWrite(const Resp* msg) = 0;
    virtual void DoFinish(const grpc::Status& s) = 0;
  };
  explicit StreamHandle(Writer* w) : writer_(w) {}

  void Send(Resp msg) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (writer_ == nullptr || finish_requested_) return;
    out_.push_back(std::move(msg));  // deque: pointers to queued messages stay valid
    if (!writing_) {
      writing_ = true;
      writer_->DoWrite(&out_.front());
    }
  }

  // Ends the stream once queued messages are written. Idempotent.
  void Finish(const grpc::Status& s) ABSL_LOCKS_EXCLUDED(mu_) {
    Writer* w = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (writer_ == nullptr || finish_requested_) return;
      finish_requested_ = true;
      status_ = s;
      if (!writing_) {
        finish_called_ = true;
        w = writer_;
      }
    }
    // Outside the lock: gRPC may run OnDone (which takes the lock) inline.
    if (w) w->DoFinish(s);
  }

  // From the reactor's OnWriteDone.
  void WriteDone(bool ok) ABSL_LOCKS_EXCLUDED(mu_) {
    Writer* w = nullptr;
    grpc::Status st;
    {
      absl::MutexLock lock(&mu_);
      if (writer_ == nullptr) return;
      out_.pop_front();
      if (!ok) out_.clear();  // the stream is broken: nothing more gets through
      if (!out_.empty()) {
        writer_->DoWrite(&out_.front());
        return;
      }
      writing_ = false;
      if (finish_requested_ && !finish_called_) {
        finish_called_ = true;
        w = writer_;
        st = status_;
      }
    }
    if (w) w->DoFinish(st);
  }

  // From the reactor's OnDone: the reactor is about to be deleted.
  void Detach() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    writer_ = nullptr;
    out_.clear();
  }

 private:
  absl::Mutex mu_;
  Writer* writer_ ABSL_GUARDED_BY(mu_);
  std::deque<Resp> out_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_called_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

// `IsClose(req)` tells a close message from the rest. Deletes itself in OnDone.
template <class Req, class Resp, bool (*IsClose)(const Req&)>
class BidiSession final : public grpc::ServerBidiReactor<Req, Resp>, public StreamHandle<Resp>::Writer {
 public:
  BidiSession(grpc::CallbackServerContext* ctx, SessionSink<Req, Resp>* sink, uint64_t id)
      : ctx_(ctx), sink_(sink), id_(id), handle_(std::make_shared<StreamHandle<Resp>>(this)) {
    this->StartRead(&req_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return End();  // half-close, cancellation or a dead peer
    if (!opened_) {
      grpc::Status s = sink_->OnOpen(id_, req_, handle_);
      if (!s.ok()) return handle_->Finish(s);
      opened_ = true;
    } else if (IsClose(req_)) {
      return End();
    } else {
      sink_->OnMessage(id_, std::move(req_));
    }
    req_.Clear();
    this->StartRead(&req_);
  }

  void OnWriteDone(bool ok) override { handle_->WriteDone(ok); }
  void OnCancel() override { End(); }

  void OnDone() override {
    handle_->Detach();
    if (opened_) sink_->OnEnd(id_, ctx_->IsCancelled());
    delete this;
  }

  void DoWrite(const Resp* msg) override { this->StartWrite(msg); }
  void DoFinish(const grpc::Status& s) override { this->Finish(s); }

 private:
  // Unopened streams have nobody else to finish them.
  void End() {
    if (opened_) {
      sink_->OnEnd(id_, ctx_->IsCancelled());
    } else {
      handle_->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream ended before open"));
    }
  }

  grpc::CallbackServerContext* ctx_;
  SessionSink<Req, Resp>* sink_;
  const uint64_t id_;
  std::shared_ptr<StreamHandle<Resp>> handle_;
  Req req_;
  // Set by OnReadDone; read by OnCancel, which may run on another thread.
  std::atomic<bool> opened_{false};
};

// A stream refused before it starts (its client may not use the service).
template <class Req, class Resp>
class RefusedStream final : public grpc::ServerBidiReactor<Req, Resp> {
 public:
  explicit RefusedStream(const grpc::Status& s) { this->Finish(s); }
  void OnDone() override { delete this; }
};

}  // namespace specserve::rpc
