#include "coordinator/k_policy.h"

#include <algorithm>
#include <cmath>

namespace specserve {
namespace {
constexpr double kDecay = 0.95;  // ~20-round memory: follows a prompt's changing difficulty
}

double KPolicy::acceptance_estimate() const { return acc_ / (acc_ + rej_); }

void KPolicy::Observe(int32_t k, int32_t accepted, double draft_seconds, double verify_seconds) {
  if (!script_.empty()) ++script_round_;
  if (!adaptive_ || k <= 0) return;
  acc_ = acc_ * kDecay + accepted;
  rej_ = rej_ * kDecay + (accepted < k ? 1 : 0);
  const double step = draft_seconds / k;
  draft_step_s_ += (rounds_ == 0 ? 1.0 : 1.0 - kDecay) * (step - draft_step_s_);
  const double x = k + 1, y = verify_seconds;
  sw_ = sw_ * kDecay + 1;
  sx_ = sx_ * kDecay + x;
  sy_ = sy_ * kDecay + y;
  sxx_ = sxx_ * kDecay + x * x;
  sxy_ = sxy_ * kDecay + x * y;
  ++rounds_;
}

double KPolicy::VerifyCost(int32_t n) const {
  if (sw_ == 0) return 0;
  const double mx = sx_ / sw_, my = sy_ / sw_;
  const double var = sxx_ / sw_ - mx * mx;
  // Until two different K have been seen the slope is unknown: assume a
  // quarter of a pass per extra token (between GPU ~0 and CPU ~1), so that
  // the policy explores instead of locking onto its first K.
  double slope = var > 1e-9 ? (sxy_ / sw_ - mx * my) / var : 0.25 * my / mx;
  slope = std::max(0.0, slope);
  return std::max(1e-9, my + slope * (n - mx));
}

void KPolicy::ObserveTarget(const TargetLoad& load, double network_seconds) {
  if (!adaptive_ || !load.known) return;
  const bool first = !load_.known;
  load_ = load;
  network_s_ += (first ? 1.0 : 1.0 - kDecay) * (std::max(0.0, network_seconds) - network_s_);
}

int32_t KPolicy::Next() const {
  if (!script_.empty()) return script_[script_round_ % script_.size()];
  // Before its first round a policy has only its initial K, unless it was
  // given the target's load (a new request under load: coordinator/target_load_board.h).
  if (!adaptive_ || (rounds_ == 0 && !load_.known)) return k_;
  const double a = std::clamp(acceptance_estimate(), 0.01, 0.995);
  // With the target's report, K = 0 competes and a token's verify cost is
  // what it costs the whole batch; without it, the fitted own-pass line.
  const int32_t k_min = load_.known ? 0 : kMin;
  const double batch = std::max(1.0, load_.sessions_per_pass);
  const double sessions = std::max(1.0, load_.active_sessions);
  auto round_seconds = [&](int32_t k) {
    if (!load_.known) return VerifyCost(k + 1) + k * draft_step_s_;
    const double pass = PassSeconds(load_, batch * (k + 1));
    const double latency = network_s_ + pass + k * draft_step_s_;
    const double throughput = sessions / batch * pass;
    return std::max(latency, throughput);
  };
  int32_t best = k_min;
  double best_rate = -1;
  for (int32_t k = k_min; k <= kMax; ++k) {
    const double expected = (1 - std::pow(a, k + 1)) / (1 - a);
    const double rate = expected / std::max(1e-9, round_seconds(k));
    if (rate > best_rate * (1 + 1e-9)) {
      best_rate = rate;
      best = k;
    }
  }
  // A first round knows the load but not the draft's step cost: the load
  // may lower the initial K, never raise it.
  return rounds_ == 0 ? std::min(best, k_) : best;
}

}  // namespace specserve
