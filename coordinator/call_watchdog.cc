#include "coordinator/call_watchdog.h"

#include <algorithm>

#include "absl/time/time.h"

namespace specserve {

CallWatchdog& CallWatchdog::Get() {
  static CallWatchdog* w = new CallWatchdog();  // never destroyed: its thread lives as long as the process
  return *w;
}

CallWatchdog::CallWatchdog() : thread_([this] { Loop(); }) { thread_.detach(); }

uint64_t CallWatchdog::Arm(grpc::ClientContext* ctx, std::chrono::steady_clock::time_point when) {
  absl::MutexLock lock(&mu_);
  const uint64_t ticket = next_++;
  armed_[ticket] = Entry{ctx, when};
  cv_.Signal();
  return ticket;
}

void CallWatchdog::Disarm(uint64_t ticket) {
  absl::MutexLock lock(&mu_);
  armed_.erase(ticket);
}

void CallWatchdog::Loop() {
  absl::MutexLock lock(&mu_);
  for (;;) {
    auto earliest = std::chrono::steady_clock::time_point::max();
    const auto now = std::chrono::steady_clock::now();
    for (auto it = armed_.begin(); it != armed_.end();) {
      if (it->second.when <= now) {
        it->second.ctx->TryCancel();  // thread-safe; the caller's Read then fails
        it = armed_.erase(it);
      } else {
        earliest = std::min(earliest, it->second.when);
        ++it;
      }
    }
    if (earliest == std::chrono::steady_clock::time_point::max()) {
      cv_.Wait(&mu_);
    } else {
      cv_.WaitWithTimeout(&mu_, absl::FromChrono(earliest - std::chrono::steady_clock::now()));
    }
  }
}

}  // namespace specserve
