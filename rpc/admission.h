// Admission control for a service (docs/services.md "Admission"): a session is let in
// only if the session limit and the KV pool can hold it to its end, so a
// running session never runs out of blocks. Each session is charged, at
// open, the blocks its longest possible sequence needs
// (prompt + max_new_tokens + the largest K, capped at the context); a session
// that does not fit is refused with RESOURCE_EXHAUSTED at once, and while
// draining every new session gets UNAVAILABLE. Thread-safe, never blocks.
#pragma once

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace specserve::rpc {

class Admission {
 public:
  Admission(int32_t max_sessions, int32_t kv_blocks) : max_sessions_(max_sessions), kv_blocks_(kv_blocks) {}

  // Charges `blocks` and one session slot, or refuses.
  absl::Status Admit(int32_t blocks);
  void Release(int32_t blocks);
  void StartDraining();

  int32_t active() const;
  int32_t reserved_blocks() const;
  // A session of `blocks` could ever be admitted (the pool is large enough).
  bool Fits(int32_t blocks) const { return blocks <= kv_blocks_; }
  bool draining() const;

  // Blocks a session may need for `positions` KV positions.
  static int32_t BlocksFor(int64_t positions, int32_t block_size) {
    return static_cast<int32_t>((positions + block_size - 1) / block_size);
  }

 private:
  const int32_t max_sessions_;
  const int32_t kv_blocks_;
  mutable absl::Mutex mu_;
  int32_t active_ ABSL_GUARDED_BY(mu_) = 0;
  int32_t charged_blocks_ ABSL_GUARDED_BY(mu_) = 0;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace specserve::rpc
