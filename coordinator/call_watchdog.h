// Per-call time limits for synchronous stream calls, which have no timeout
// of their own (only the whole call's deadline). One thread keeps the armed
// limits and cancels the context of a call that overstays, so its blocked
// Read returns. Used for the draft service: a draft that is slow (a stopped
// or overloaded process, a network partition) must not hold the request up;
// the request falls back to n-gram drafting, still exact (docs/failure_behaviour.md
// "Draft failure").
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>

#include <grpcpp/grpcpp.h>

namespace specserve {

class CallWatchdog {
 public:
  static CallWatchdog& Get();  // the process's one watchdog, started on first use

  // TryCancel()s `ctx` at `when` unless disarmed first. Returns a ticket for Disarm.
  uint64_t Arm(grpc::ClientContext* ctx, std::chrono::steady_clock::time_point when);
  // After this returns the watchdog no longer touches the context.
  void Disarm(uint64_t ticket);

 private:
  CallWatchdog();
  void Loop();

  struct Entry {
    grpc::ClientContext* ctx;
    std::chrono::steady_clock::time_point when;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Entry> armed_;
  uint64_t next_ = 1;
  std::thread thread_;
};

}  // namespace specserve
