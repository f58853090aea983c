// The skeleton both model services share: session admission on the gRPC
// thread, then one scheduler thread that owns the backend, the KV pool and
// every session, takes all queued events at once and runs one batched pass
// per iteration (docs/services.md "Inside a service"). A role (draft or target)
// supplies its per-session State and four hooks; everything about streams,
// limits, closing and metrics lives here once.
//
// Threads: OnOpen / OnMessage / OnEnd run on gRPC threads and only check and
// enqueue. Everything else, `sessions_` included, belongs to the scheduler.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/check.h"
#include "common/log.h"
#include "common/trace_context.h"
#include "rpc/admission.h"
#include "rpc/batch_runner.h"
#include "rpc/bidi_session.h"
#include "rpc/model_host.h"
#include "rpc/proto_convert.h"
#include "rpc/service_metrics.h"
#include "rpc/status_convert.h"
#include "rpc/wait_queue.h"
#include "rpc/work_queue.h"
#include "spec/round.h"

namespace specserve::rpc {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

template <class Req, class Resp, class State>
class SessionService : public SessionSink<Req, Resp> {
 public:
  struct Entry {
    std::shared_ptr<StreamHandle<Resp>> handle;
    int32_t charged_blocks = 0;
    // Opened, last request, or last served by a pass: the client owes the
    // next message from here, and idle sessions end --session-idle-timeout-s
    // after it.
    Clock::time_point idle_since;
    State state;
  };

  ~SessionService() override { Stop(); }

  // Gather: before a pass, wait up to `window` (and at most half the last
  // pass) for the sessions the last pass served to send their next message.
  // Without it, sessions whose client answers within a millisecond of a
  // verdict still miss the pass that starts at once with whoever else is
  // queued, and a batch splits into cohorts that alternate, each pass
  // holding half the sessions (docs/decisions/0012-batch-gather.md). A
  // session that never answers is waited for
  // once: it is not among the sessions the next pass serves. Call before Attach.
  void SetBatchGather(std::chrono::microseconds window) { gather_ = window; }
  // The gather the next pass gets (scheduler thread): min(window, half the
  // last pass); 0 without one.
  double gather_seconds() const {
    const Clock::duration g = GatherWindow();
    return g.count() > 0 ? std::chrono::duration<double>(g).count() : 0.0;
  }

  // The model is loaded: start the scheduler and let sessions in. A session
  // with no message for `idle_timeout` ends with DEADLINE_EXCEEDED (0: never),
  // so a client that opens sessions and walks away cannot hold the KV pool.
  // A session that does not fit now waits up to `queue_timeout` for KV
  // blocks or a session slot, in arrival order (0: refused at once).
  void Attach(ModelHost* host, ServiceMetrics* metrics, int max_sessions,
              std::chrono::milliseconds idle_timeout = std::chrono::milliseconds(0),
              std::chrono::milliseconds queue_timeout = std::chrono::milliseconds(0)) {
    host_ = host;
    metrics_ = metrics;
    idle_timeout_ = idle_timeout;
    queue_timeout_ = queue_timeout;
    max_waiting_ = max_sessions;
    waiting_.set_capacity(static_cast<size_t>(max_sessions));
    admission_ = std::make_unique<Admission>(max_sessions, host->backend->kv_pool().num_blocks());
    metrics_->kv_blocks_capacity.Set(host->backend->kv_pool().num_blocks());
    scheduler_ = std::thread([this] { Loop(); });
    ready_.store(true);
  }
  void StartDraining() {
    if (admission_) admission_->StartDraining();
  }
  int active() const { return admission_ ? admission_->active() : 0; }
  bool ready() const { return ready_.load(); }
  void Stop() {
    queue_.Stop();
    if (scheduler_.joinable()) scheduler_.join();
  }

  // The request a new stream works for, from its metadata (x-request-id,
  // traceparent): the session's log line, written when it ends, carries them.
  void NoteStream(uint64_t id, const grpc::CallbackServerContext& ctx) ABSL_LOCKS_EXCLUDED(streams_mu_) {
    auto value = [&ctx](const char* key) {
      auto it = ctx.client_metadata().find(key);
      return it == ctx.client_metadata().end() ? std::string() : std::string(it->second.data(), it->second.size());
    };
    std::optional<TraceContext> trace = ParseTraceparent(value(kTraceparentHeader));
    absl::MutexLock lock(&streams_mu_);
    if (streams_.size() > 100000) streams_.clear();  // streams that never opened: keep the map bounded
    streams_[id] = StreamIds{value("x-request-id"), trace ? trace->trace_id : "", Clock::now()};
  }

  grpc::Status OnOpen(uint64_t id, const Req& first, std::shared_ptr<StreamHandle<Resp>> handle) override {
    grpc::Status s = Open(id, first, std::move(handle));
    if (!s.ok()) LogSessionEnd(id, s);
    return s;
  }

  grpc::Status Open(uint64_t id, const Req& first, std::shared_ptr<StreamHandle<Resp>> handle) {
    if (!ready_.load()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "model is still loading");
    if (!first.has_open()) {
      return Refuse(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the first message must be `open`"));
    }
    SessionSpec spec = SpecFromProto(first.open());
    const ModelConfig& config = host_->backend->config();
    if (absl::Status s = host_->CompileGrammar(&spec); !s.ok()) return Refuse(ToGrpc(s));
    if (absl::Status s = ValidateSessionSpec(spec, config); !s.ok()) return Refuse(ToGrpc(s));
    // The longest sequence this session can hold: every token it may commit
    // plus a speculative block in flight and, on the draft, one more drafted
    // ahead of it (overlap).
    const int64_t positions = std::min<int64_t>(
        config.n_ctx, static_cast<int64_t>(spec.prompt.size()) + spec.max_new_tokens + 2 * (kMaxRoundK + 1));
    const int32_t blocks = Admission::BlocksFor(positions, host_->backend->kv_pool().block_size());
    Event e;
    e.kind = Event::kOpen;
    // Behind sessions already waiting, a new one waits too (arrival order).
    absl::Status s = waiting_count_.load() > 0
                         ? absl::ResourceExhaustedError("sessions are waiting for KV blocks")
                         : admission_->Admit(blocks);
    if (!s.ok()) {
      const bool can_wait = absl::IsResourceExhausted(s) && queue_timeout_.count() > 0 && admission_->Fits(blocks) &&
                            waiting_count_.load() < max_waiting_;
      if (!can_wait) return Refuse(ToGrpc(s));
      ++waiting_count_;
      e.kind = Event::kWait;
      e.deadline = Clock::now() + queue_timeout_;
    }
    e.id = id;
    e.spec = std::move(spec);
    e.blocks = blocks;
    e.handle = std::move(handle);
    queue_.Push(std::move(e));
    return grpc::Status::OK;
  }

  void OnMessage(uint64_t id, Req msg) override {
    Event e;
    e.kind = Event::kMessage;
    e.id = id;
    e.msg = std::move(msg);
    queue_.Push(std::move(e));
  }

  void OnEnd(uint64_t id, bool cancelled) override {
    Event e;
    e.kind = Event::kEnd;
    e.id = id;
    e.cancelled = cancelled;
    queue_.Push(std::move(e));
  }

  uint64_t NextStreamId() { return next_id_.fetch_add(1); }

 protected:
  // Role hooks, all on the scheduler thread.
  // A new session (its spec already validated); may answer at once.
  virtual absl::Status InitState(Entry& e, const SessionSpec& spec) = 0;
  // A request for session `id` arrived at `received`; errors end the session.
  virtual absl::Status Accept(uint64_t id, Entry& e, Req msg, Clock::time_point received) = 0;
  // The session has a request queued or a pass to run.
  virtual bool Busy(const Entry& e) const = 0;
  // One batched pass over whatever is ready; ends sessions that fail.
  virtual void Iterate() = 0;

  // Frees a session's KV blocks and admission charge and ends its stream.
  void EndSession(uint64_t id, const grpc::Status& status) {
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return;
    it->second.handle->Finish(status);
    const int32_t blocks = it->second.charged_blocks;
    sessions_.erase(it);  // the role state's destructor returns its KV blocks
    admission_->Release(blocks);
    metrics_->Sessions(StatusLabel(status.error_code())).Increment();
    LogSessionEnd(id, status);
  }

  // One line per session: how it ended, how long it lasted, whose it was.
  void LogSessionEnd(uint64_t id, const grpc::Status& status) ABSL_LOCKS_EXCLUDED(streams_mu_) {
    StreamIds ids;
    {
      absl::MutexLock lock(&streams_mu_);
      auto it = streams_.find(id);
      if (it == streams_.end()) return;
      ids = std::move(it->second);
      streams_.erase(it);
    }
    const bool fine = status.ok() || status.error_code() == grpc::StatusCode::CANCELLED;
    std::vector<log::Field> fields = {{"session", static_cast<int64_t>(id)},
                                      {"status", StatusLabel(status.error_code())},
                                      {"seconds", SecondsSince(ids.opened)},
                                      {"request_id", ids.request_id},
                                      {"trace_id", ids.trace_id}};
    if (!fine) fields.emplace_back("error", status.error_message());
    log::Line(fine ? log::Level::kInfo : log::Level::kWarn, "session", fields, /*with_scope=*/false);
  }

  Backend& backend() { return *host_->backend; }
  ServiceMetrics& metrics() { return *metrics_; }

  std::map<uint64_t, Entry> sessions_;  // ordered by id: batches keep arrival order

 private:
  struct Event {
    enum Kind { kOpen, kWait, kMessage, kEnd } kind = kOpen;
    Clock::time_point deadline;  // kWait: refused if not admitted by then
    uint64_t id = 0;
    SessionSpec spec;
    int32_t blocks = 0;
    std::shared_ptr<StreamHandle<Resp>> handle;
    Req msg;
    bool cancelled = false;
    Clock::time_point received = Clock::now();
  };

  bool HasWork() const {
    for (const auto& [id, e] : sessions_) {
      if (Busy(e)) return true;
    }
    return false;
  }

  grpc::Status Refuse(const grpc::Status& s) {
    metrics_->Sessions(StatusLabel(s.error_code())).Increment();
    return s;
  }

  // The pool's cumulative prefix-cache figures, as counter increments.
  void ExportPrefixStats() {
    const KvPool::PrefixStats s = backend().kv_pool().prefix_stats();
    metrics_->prefix_cache_queries.Increment(static_cast<double>(s.queries - prefix_seen_.queries));
    metrics_->prefix_cache_hits.Increment(static_cast<double>(s.hits - prefix_seen_.hits));
    metrics_->prefix_cache_hit_tokens.Increment(static_cast<double>(s.hit_tokens - prefix_seen_.hit_tokens));
    metrics_->prefix_cache_blocks.Set(s.cached_blocks);
    prefix_seen_ = s;
  }

  void Loop() {
    std::deque<Event> events;
    while (queue_.TakeAll(&events, !HasWork(), std::chrono::milliseconds(200))) {
      for (Event& e : events) Apply(e);
      events.clear();
      GatherLastPass(&events);
      AdmitWaiting();
      // After every message that arrived during the last pass is applied: a
      // client that answered while a long pass ran is not idle.
      EndIdleSessions();
      IterateAndRestartIdleClocks();
      metrics_->active_sessions.Set(static_cast<double>(sessions_.size()));
      metrics_->kv_blocks_used.Set(backend().kv_pool().used_blocks());
      metrics_->kv_blocks_reserved.Set(admission_->reserved_blocks());
      ExportPrefixStats();
    }
    // Stopped: whatever is left is cancelled (the server is already shut down).
    waiting_.TakeAll(
        [](Waiting&& w) { w.open.handle->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server stopped")); });
    while (!sessions_.empty()) {
      EndSession(sessions_.begin()->first, grpc::Status(grpc::StatusCode::UNAVAILABLE, "server stopped"));
    }
    metrics_->active_sessions.Set(0);
    metrics_->kv_blocks_reserved.Set(0);
  }

  // One pass; the sessions it served owe their clients the next message from
  // its end, not from their last message: a prefill (or a batch of them)
  // longer than the idle timeout once ended the very session it had just
  // answered, and so did the next long pass, for a session whose answer
  // waited in the event queue behind it (e2e_reliability_test
  // "ASessionWhosePrefillOutlastsTheIdleTimeout").
  void IterateAndRestartIdleClocks() {
    served_.clear();
    for (const auto& [id, e] : sessions_) {
      if (Busy(e)) served_.push_back(id);
    }
    const auto start = Clock::now();
    Iterate();
    const auto now = Clock::now();
    if (!served_.empty()) last_pass_ = now - start;
    for (uint64_t id : served_) {
      if (auto it = sessions_.find(id); it != sessions_.end()) it->second.idle_since = now;
    }
  }

  // See SetBatchGather. Waits only while some work is ready (else the loop
  // sleeps anyway) and some session the last pass served is still open with
  // nothing queued; applies what arrives meanwhile.
  Clock::duration GatherWindow() const { return std::min<Clock::duration>(gather_, last_pass_ / 2); }
  void GatherLastPass(std::deque<Event>* events) {
    if (gather_.count() <= 0 || served_.empty()) return;
    const auto deadline = Clock::now() + GatherWindow();
    auto missing = [&] {
      for (uint64_t id : served_) {
        auto it = sessions_.find(id);
        if (it != sessions_.end() && !Busy(it->second)) return true;
      }
      return false;
    };
    while (HasWork() && missing()) {
      const auto left = deadline - Clock::now();
      if (left <= Clock::duration::zero()) return;
      if (!queue_.TakeAll(events, true, left)) return;
      for (Event& e : *events) Apply(e);
      events->clear();
    }
  }

  // Ends sessions that have had no message for idle_timeout_ and have no
  // work queued (a session waiting on its own batch pass is never idle).
  void EndIdleSessions() {
    if (idle_timeout_.count() <= 0) return;
    const auto now = Clock::now();
    std::vector<uint64_t> idle;
    for (const auto& [id, e] : sessions_) {
      if (now - e.idle_since > idle_timeout_ && !Busy(e)) idle.push_back(id);
    }
    for (uint64_t id : idle) {
      EndSession(id, grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                  absl::StrCat("session idle for more than ", idle_timeout_.count() / 1000.0,
                                               " s (--session-idle-timeout-s)")));
    }
  }

  // Sessions waiting for admission, in arrival order, with the messages
  // their client sent meanwhile.
  struct Waiting {
    Event open;
    std::vector<Event> messages;
  };

  void StopWaiting(Waiting&& w, const grpc::Status& status) {
    --waiting_count_;
    w.open.handle->Finish(status);
    metrics_->Sessions(StatusLabel(status.error_code())).Increment();
    LogSessionEnd(w.open.id, status);
  }

  // Admits waiting sessions in order while they fit; refuses those past
  // their deadline (RESOURCE_EXHAUSTED) or all of them once draining.
  void AdmitWaiting() {
    if (admission_->draining()) {
      waiting_.TakeAll([&](Waiting&& w) {
        StopWaiting(std::move(w), grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is shutting down"));
      });
    }
    const auto now = Clock::now();
    waiting_.Expire(now, [&](Waiting&& w) {
      StopWaiting(std::move(w), grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                             absl::StrCat("no KV blocks or session slot within ",
                                                          queue_timeout_.count() / 1000.0, " s (--queue-timeout-s)")));
    });
    // The oldest first; one that does not fit yet keeps the others behind it.
    while (Waiting* front = waiting_.Front()) {
      if (!admission_->Admit(front->open.blocks).ok()) break;
      Waiting w = waiting_.PopFront();
      --waiting_count_;
      w.open.kind = Event::kOpen;
      w.open.received = now;  // idle time counts from admission
      Apply(w.open);
      for (Event& m : w.messages) Apply(m);
    }
    metrics_->sessions_waiting.Set(static_cast<double>(waiting_.size()));
  }

  void Apply(Event& e) {
    switch (e.kind) {
      case Event::kWait: {
        const uint64_t id = e.id;
        const Clock::time_point deadline = e.deadline;
        waiting_.Push(id, deadline, Waiting{std::move(e), {}});
        break;
      }
      case Event::kOpen: {
        auto [it, inserted] = sessions_.try_emplace(e.id);
        SPECSERVE_CHECK(inserted);
        it->second.handle = std::move(e.handle);
        it->second.charged_blocks = e.blocks;
        it->second.idle_since = e.received;
        if (absl::Status s = InitState(it->second, e.spec); !s.ok()) EndSession(e.id, ToGrpc(s));
        break;
      }
      case Event::kMessage: {
        if (Waiting* w = waiting_.Find(e.id)) {
          w->messages.push_back(std::move(e));
          return;
        }
        auto it = sessions_.find(e.id);
        if (it == sessions_.end()) return;  // ended already
        it->second.idle_since = std::max(it->second.idle_since, e.received);
        absl::Status s = Accept(e.id, it->second, std::move(e.msg), e.received);
        if (!s.ok()) EndSession(e.id, ToGrpc(s));
        break;
      }
      case Event::kEnd:
        if (std::optional<Waiting> w = waiting_.Take(e.id)) {
          StopWaiting(std::move(*w), grpc::Status::CANCELLED);
          return;
        }
        EndSession(e.id, e.cancelled ? grpc::Status::CANCELLED : grpc::Status::OK);
        break;
    }
  }

  struct StreamIds {
    std::string request_id, trace_id;
    Clock::time_point opened;
  };
  absl::Mutex streams_mu_;
  std::map<uint64_t, StreamIds> streams_ ABSL_GUARDED_BY(streams_mu_);  // NoteStream'd, not yet logged
  ModelHost* host_ = nullptr;
  ServiceMetrics* metrics_ = nullptr;
  std::unique_ptr<Admission> admission_;
  KvPool::PrefixStats prefix_seen_;  // the pool's figures at the last export (scheduler thread)
  std::chrono::milliseconds idle_timeout_{0};
  std::vector<uint64_t> served_;  // the sessions the last pass served (IterateAndRestartIdleClocks)
  Clock::duration last_pass_{};   // how long that pass took
  std::chrono::microseconds gather_{0};
  std::chrono::milliseconds queue_timeout_{0};
  int max_waiting_ = 0;
  std::atomic<int> waiting_count_{0};  // OnOpen reads it on gRPC threads
  WaitQueue<Waiting> waiting_{0};      // scheduler thread only; its limit is checked in Open
  std::atomic<bool> ready_{false};
  std::atomic<uint64_t> next_id_{1};
  WorkQueue<Event> queue_;
  std::thread scheduler_;
};

}  // namespace specserve::rpc
