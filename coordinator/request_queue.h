// The coordinator's admission (docs/services.md "Admission"): at most
// `max_running` requests run at once (--max-sessions); more wait in arrival
// order (rpc/wait_queue.h) instead of being refused, each until
//   - a run slot frees: it starts (OK);
//   - its caller's deadline passes: DEADLINE_EXCEEDED;
//   - it has waited `timeout` (--queue-timeout-s): RESOURCE_EXHAUSTED, which
//     HTTP clients see as 429 and retry;
//   - its caller leaves (Cancel): CANCELLED;
//   - the coordinator drains: UNAVAILABLE.
// A full waiting line (--max-waiting) refuses at once with RESOURCE_EXHAUSTED.
//
// Thread-safe. Each request's Decision runs exactly once, never under the
// queue's lock: on the submitting thread when a slot is free at once, on the
// thread that released a slot, on the queue's timer thread at a deadline, or
// on the thread that cancels or drains.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "rpc/wait_queue.h"

namespace specserve {

class RequestQueue {
 public:
  using Clock = std::chrono::steady_clock;
  // OK: the request holds its slots and must Release them when it ends.
  // Otherwise: why it will not run (it holds nothing).
  using Decision = std::function<void(absl::Status)>;

  struct Options {
    int max_running = 64;                         // --max-sessions
    int max_waiting = 256;                        // --max-waiting (0: refuse at once when full)
    std::chrono::milliseconds timeout{10000};     // --queue-timeout-s
    std::function<void(int delta)> on_waiting{};  // the waiting line grew or shrank (a gauge)
  };

  explicit RequestQueue(Options opts);
  ~RequestQueue();  // waiters get UNAVAILABLE
  RequestQueue(const RequestQueue&) = delete;
  RequestQueue& operator=(const RequestQueue&) = delete;

  // Asks for `slots` run slots (1..max_running: an HTTP request's n choices
  // start together) before the caller's `deadline` (Clock::time_point::max()
  // for none). Returns a ticket for Cancel.
  uint64_t Submit(int slots, Clock::time_point deadline, Decision decide) ABSL_LOCKS_EXCLUDED(mu_);
  // A request that is still waiting leaves it (CANCELLED); a started or
  // refused one is not affected.
  void Cancel(uint64_t ticket) ABSL_LOCKS_EXCLUDED(mu_);
  // A started request ended: its slots go to the oldest waiters that fit.
  void Release(int slots) ABSL_LOCKS_EXCLUDED(mu_);
  // Waiters and new requests get UNAVAILABLE from now on.
  void StartDraining() ABSL_LOCKS_EXCLUDED(mu_);

  int running() const ABSL_LOCKS_EXCLUDED(mu_);  // slots held
  int waiting() const ABSL_LOCKS_EXCLUDED(mu_);  // requests in line
  bool draining() const ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until nothing runs and nothing waits.
  void WaitIdle() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Waiter {
    int slots = 1;
    Clock::time_point deadline;  // the caller's own (a later one is the queue timeout)
    Decision decide;
  };
  using Decided = std::vector<std::pair<Decision, absl::Status>>;

  // Starts waiters from the front while they fit.
  void AdmitLocked(Decided* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WaitingChanged(int delta);
  void TimerLoop() ABSL_LOCKS_EXCLUDED(mu_);
  static void Run(Decided& decided);

  const Options opts_;
  mutable absl::Mutex mu_;
  absl::CondVar changed_;  // the timer's deadlines, WaitIdle
  rpc::WaitQueue<Waiter> line_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread timer_;
};

// steady_clock deadline for a system_clock one (gRPC's); max() stays max().
RequestQueue::Clock::time_point SteadyDeadline(std::chrono::system_clock::time_point deadline);

}  // namespace specserve
