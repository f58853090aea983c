#include "coordinator/stats_log.h"

#include "absl/time/time.h"

namespace specserve {

StatsLog::StatsLog(CoordinatorMetrics* metrics, std::chrono::duration<double> interval)
    : metrics_(metrics), interval_(interval) {
  if (metrics_ && interval_.count() > 0) thread_ = std::thread([this] { Loop(); });
}

StatsLog::~StatsLog() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

std::vector<log::Field> StatsLog::Fields(const CoordinatorMetrics::Totals& a, const CoordinatorMetrics::Totals& b,
                                         double seconds, double running, double waiting) {
  const double tokens = b.tokens - a.tokens;
  const int64_t rounds = b.rounds - a.rounds, drafted = b.drafted - a.drafted, accepted = b.accepted - a.accepted;
  return {{"interval_s", seconds},
          {"tokens_per_s", seconds > 0 ? tokens / seconds : 0.0},
          {"requests_running", static_cast<int64_t>(running)},
          {"requests_waiting", static_cast<int64_t>(waiting)},
          {"rounds", rounds},
          {"acceptance_rate", drafted > 0 ? static_cast<double>(accepted) / drafted : 0.0},
          {"tokens_per_round", rounds > 0 ? tokens / rounds : 0.0}};
}

void StatsLog::Loop() {
  using Clock = std::chrono::steady_clock;
  CoordinatorMetrics::Totals last = metrics_->totals();
  Clock::time_point last_at = Clock::now();
  absl::MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Seconds(interval_.count()))) {
    const CoordinatorMetrics::Totals now = metrics_->totals();
    const Clock::time_point now_at = Clock::now();
    const double seconds = std::chrono::duration<double>(now_at - last_at).count();
    log::Line(log::Level::kInfo, "stats",
              Fields(last, now, seconds, metrics_->requests_running.Value(), metrics_->requests_waiting.Value()),
              /*with_scope=*/false);
    last = now;
    last_at = now_at;
  }
}

}  // namespace specserve
