// Drafter and Verifier over the services' Session streams (internal.proto),
// so RunSpeculative (coordinator/round_loop.h) runs the same loop across
// three processes as in one. Each engine holds one synchronous bidi stream,
// used by the request's own worker thread only (never a gRPC callback
// thread).
//
// Open sends `open` and returns without waiting: the two services prefill at
// the same time, and the `opened` answer is read before the first round's.
// Closing half-closes the stream and waits for the service's OK; a broken
// stream is cancelled instead. Either way the service frees the session.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/roles.h"
#include "specserve/v1/internal.grpc.pb.h"

namespace specserve {

// The client contexts of one request, so the request's cancellation (from
// its reactor's OnCancel, on another thread) reaches every session at once.
class CancelGroup {
 public:
  // False (and nothing is registered) when the group is already cancelled.
  bool Add(grpc::ClientContext* ctx) ABSL_LOCKS_EXCLUDED(mu_);
  void Remove(grpc::ClientContext* ctx) ABSL_LOCKS_EXCLUDED(mu_);
  void Cancel() ABSL_LOCKS_EXCLUDED(mu_);  // TryCancel on every registered context; later Adds fail
  bool cancelled() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  std::set<grpc::ClientContext*> contexts_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

// Per-stream settings shared by both engines.
struct RemoteOptions {
  CancelGroup* cancel = nullptr;                    // required
  std::chrono::system_clock::time_point deadline =  // the client's deadline, propagated
      std::chrono::system_clock::time_point::max();
  // Longest one call may take before its stream is cancelled (0: no limit).
  // The drafter uses it: a slow draft is a failed draft (coordinator/call_watchdog.h).
  std::chrono::milliseconds call_timeout{0};
  // The first call also waits for the service's prefill of the prompt: it
  // gets call_timeout plus this many ms per prompt token (a long prompt on a
  // slow draft is not a stalled draft; a stopped one still fails on a short
  // prompt after about call_timeout).
  double open_ms_per_token = 0;
  // Sent as metadata with the stream (x-request-id, traceparent).
  std::vector<std::pair<std::string, std::string>> metadata{};
};

// One Session stream used call-and-answer. Req/Resp: TargetRequest/Response
// or DraftRequest/Response.
template <class Req, class Resp>
class SyncSession {
 public:
  explicit SyncSession(const RemoteOptions& opts) : opts_(opts) {}
  ~SyncSession() { Close(); }

  // `start` opens the stream on a context: stub->Session(ctx).
  template <class StartFn>
  absl::Status Open(StartFn start, const Req& open);
  // Writes `req` and reads its answer (after the pending `opened`, if any).
  absl::StatusOr<Resp> Call(const Req& req);
  // Writes `req`, which has no answer. A failure shows in the next Call.
  // May run beside AwaitOpened on another thread (one writer, one reader).
  void Send(const Req& req) {
    if (stream_ && healthy_) stream_->Write(req);
  }
  // Reads the pending `opened` answer, if any, within the same time limit
  // as a Call. A failure is returned and shows again in the next Call; the
  // stream itself is left to Close (Send may run beside this).
  absl::Status AwaitOpened();
  void Close();
  bool open() const { return stream_ != nullptr; }

 private:
  absl::Status Broken(const char* what);
  // Arms the watchdog for one exchange (call_timeout, plus the prefill
  // allowance while `opened` is pending); disarmed when it goes.
  struct Limit {
    uint64_t ticket = 0;
    std::chrono::steady_clock::time_point when = std::chrono::steady_clock::time_point::max();
    ~Limit();
  };
  void Arm(Limit& limit);
  // A call the watchdog cut is a slow service, not a cancelled request.
  absl::Status Cut(const Limit& limit, absl::Status s, const char* what) const;

  RemoteOptions opts_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::ClientReaderWriterInterface<Req, Resp>> stream_;
  // Written by AwaitOpened (on the loop's worker) or Call, never at once.
  std::atomic<bool> awaiting_opened_{false};
  bool healthy_ = false;
  std::chrono::milliseconds open_allowance_{0};  // opts_.open_ms_per_token x this prompt's tokens
};

class RemoteVerifier final : public Verifier {
 public:
  RemoteVerifier(v1::TargetService::StubInterface* stub, const RemoteOptions& opts) : stub_(stub), session_(opts) {}
  absl::Status Open(const SessionSpec& spec) override;
  absl::StatusOr<RoundResult> Verify(int64_t round, const Proposal& p) override;
  void Close() override { session_.Close(); }
  bool remote() const override { return true; }

 private:
  v1::TargetService::StubInterface* stub_;
  SyncSession<v1::TargetRequest, v1::TargetResponse> session_;
  bool logprobs_ = false;  // the session asked for logprobs
};

class RemoteDrafter final : public Drafter {
 public:
  RemoteDrafter(v1::DraftService::StubInterface* stub, const RemoteOptions& opts) : stub_(stub), session_(opts) {}
  absl::Status Open(const SessionSpec& spec) override;
  absl::Status AwaitOpen() override { return session_.AwaitOpened(); }
  // Sends `commit` (no answer).
  absl::Status Commit(const Verdict& v) override;
  absl::StatusOr<Proposal> Propose(int64_t round, int32_t k) override;
  void Close() override { session_.Close(); }
  absl::string_view name() const override { return kModelDrafterName; }
  bool remote() const override { return true; }
  // Overlap: asks the draft service to draft the next block now (no answer;
  // runs on the loop's second thread while this stream is otherwise idle).
  void PrepareAhead(int32_t k) override;

 private:
  v1::DraftService::StubInterface* stub_;
  SyncSession<v1::DraftRequest, v1::DraftResponse> session_;
};

}  // namespace specserve
