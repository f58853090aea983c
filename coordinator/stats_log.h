// The coordinator's periodic log line (--stats-interval-s, default 10, 0:
// off): what happened since the previous line.
//
//   specserve-coordinator: stats interval_s=10.0 tokens_per_s=412.3 requests_running=3 requests_waiting=0
//       rounds=160 acceptance_rate=0.71 tokens_per_round=3.2
//
// acceptance_rate is drafted tokens accepted over drafted tokens verified,
// tokens_per_round the tokens sent to clients per target pass (both 0 when
// no round ran). Read from CoordinatorMetrics' running totals.
#pragma once

#include <chrono>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "coordinator/coordinator_metrics.h"

namespace specserve {

class StatsLog {
 public:
  // interval <= 0: no line, no thread.
  StatsLog(CoordinatorMetrics* metrics, std::chrono::duration<double> interval);
  ~StatsLog();
  StatsLog(const StatsLog&) = delete;
  StatsLog& operator=(const StatsLog&) = delete;

  // The line's fields between two snapshots of the totals, `seconds` apart.
  static std::vector<log::Field> Fields(const CoordinatorMetrics::Totals& before,
                                        const CoordinatorMetrics::Totals& now, double seconds, double running,
                                        double waiting);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  CoordinatorMetrics* metrics_;
  const std::chrono::duration<double> interval_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // ends the wait between lines at once
  std::thread thread_;
};

}  // namespace specserve
