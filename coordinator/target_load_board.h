// The target's latest load report (spec/round.h TargetLoad), shared by the
// coordinator's requests. Each verdict's report is posted here; a new
// request's adaptive K starts from it (docs/round_protocol.md "K under load")
// instead of from the default K, so that under a saturated target its first
// round is already plain decoding and does not wait for the draft's prefill.
// With it, the adaptive policy of the request that drafted last: a new
// request starts from its acceptance and draft cost (KPolicy::Seed) instead
// of a prior. And the count of this coordinator's requests running on the
// target now, which corrects a report posted before a burst of arrivals
// (Latest). Thread-safe.
#pragma once

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/k_policy.h"
#include "spec/round.h"

namespace specserve {

class TargetLoadBoard {
 public:
  using Clock = std::chrono::steady_clock;

  struct Report {
    TargetLoad load;
    double network_seconds = 0;  // the verify call's time outside the target
  };

  void Post(const TargetLoad& load, double network_seconds) {
    if (!load.known) return;
    absl::MutexLock lock(&mu_);
    latest_ = Report{load, network_seconds};
    posted_ = Clock::now();
  }

  // The latest report, if one came within `max_age` (an old one says
  // nothing about the load now). When more of this coordinator's requests
  // run now (Join) than the report counted sessions, it counts them, and its
  // sessions per pass grow in proportion (at most to that count): a report
  // from the last request of a quiet spell says 1 session, and the 8 that
  // arrive together next would otherwise all draft their first round as if
  // alone, and stay drafting among plain batch-mates
  // (docs/decisions/0010-seeding-new-requests.md).
  std::optional<Report> Latest(Clock::duration max_age = std::chrono::seconds(10)) const {
    absl::MutexLock lock(&mu_);
    if (!latest_ || Clock::now() - posted_ > max_age) return std::nullopt;
    Report r = *latest_;
    const double live = live_;
    if (live > r.load.active_sessions) {
      const double per_session = r.load.sessions_per_pass / std::max(1.0, r.load.active_sessions);
      r.load.sessions_per_pass = std::min(live, std::max(1.0, per_session * live));
      r.load.active_sessions = live;
    }
    return r;
  }

  // Held by each request while it runs on the target.
  class Live {
   public:
    explicit Live(TargetLoadBoard* board) : board_(board) {
      absl::MutexLock lock(&board_->mu_);
      ++board_->live_;
    }
    ~Live() {
      absl::MutexLock lock(&board_->mu_);
      --board_->live_;
    }
    Live(const Live&) = delete;
    Live& operator=(const Live&) = delete;

   private:
    TargetLoadBoard* board_;
  };
  Live Join() { return Live(this); }
  int live() const {
    absl::MutexLock lock(&mu_);
    return live_;
  }

  // Policies are kept per drafter (`drafter`: its registry id, DrafterEntry::id): an
  // n-gram drafter's acceptance and cost say nothing of the model's.
  void PostPolicy(int drafter, const KPolicy& policy) {
    if (!policy.learned()) return;
    absl::MutexLock lock(&mu_);
    policies_.insert_or_assign(drafter, Learned{policy, Clock::now()});
  }
  std::optional<KPolicy> LatestPolicy(int drafter, Clock::duration max_age = std::chrono::minutes(10)) const {
    absl::MutexLock lock(&mu_);
    auto it = policies_.find(drafter);
    if (it == policies_.end() || Clock::now() - it->second.posted > max_age) return std::nullopt;
    return it->second.policy;
  }

 private:
  mutable absl::Mutex mu_;
  std::optional<Report> latest_ ABSL_GUARDED_BY(mu_);
  Clock::time_point posted_ ABSL_GUARDED_BY(mu_);
  struct Learned {
    KPolicy policy;
    Clock::time_point posted;
  };
  std::map<int, Learned> policies_ ABSL_GUARDED_BY(mu_);
  int live_ ABSL_GUARDED_BY(mu_) = 0;  // requests holding a Live
};

}  // namespace specserve
