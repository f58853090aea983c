// Per-call time limits for synchronous stream calls, which have no timeout
// of their own (only the whole call's deadline). One thread keeps the armed
// limits and cancels the context of a call that overstays, so its blocked
// Read returns. Used for the draft service: a draft that is slow (a stopped
// or overloaded process, a network partition) must not hold the request up;
// the request falls back to n-gram drafting, still exact (docs/failure_behaviour.md
// "Draft failure").
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace specserve {

class CallWatchdog {
 public:
  static CallWatchdog& Get();  // the process's one watchdog, started on first use

  // TryCancel()s `ctx` at `when` unless disarmed first. Returns a ticket for Disarm.
  uint64_t Arm(grpc::ClientContext* ctx, std::chrono::steady_clock::time_point when) ABSL_LOCKS_EXCLUDED(mu_);
  // After this returns the watchdog no longer touches the context.
  void Disarm(uint64_t ticket) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  CallWatchdog();
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  struct Entry {
    grpc::ClientContext* ctx;
    std::chrono::steady_clock::time_point when;
  };
  absl::Mutex mu_;
  absl::CondVar cv_;
  std::map<uint64_t, Entry> armed_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 1;
  std::thread thread_;
};

}  // namespace specserve
