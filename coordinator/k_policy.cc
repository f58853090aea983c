#include "coordinator/k_policy.h"

#include <algorithm>
#include <cmath>

namespace specserve {
namespace {
constexpr double kDecay = 0.95;  // ~20-round memory: follows a prompt's changing difficulty
}

double KPolicy::acceptance_estimate() const { return acc_ / (acc_ + rej_); }

void KPolicy::Observe(int32_t k, int32_t accepted, double draft_seconds, double verify_seconds) {
  if (!adaptive_ || k <= 0) return;
  acc_ = acc_ * kDecay + accepted;
  rej_ = rej_ * kDecay + (accepted < k ? 1 : 0);
  const double step = draft_seconds / k;
  const double w = rounds_ == 0 ? 1.0 : 1.0 - kDecay;
  draft_step_s_ += w * (step - draft_step_s_);
  verify_s_ += w * (verify_seconds - verify_s_);
  ++rounds_;
}

int32_t KPolicy::Next() const {
  if (!adaptive_ || rounds_ == 0) return k_;
  const double a = std::clamp(acceptance_estimate(), 0.01, 0.995);
  const double c = verify_s_ > 0 ? draft_step_s_ / verify_s_ : 0.1;
  int32_t best = kMin;
  double best_rate = -1;
  for (int32_t k = kMin; k <= kMax; ++k) {
    const double expected = (1 - std::pow(a, k + 1)) / (1 - a);
    const double rate = expected / (1 + k * c);
    if (rate > best_rate * (1 + 1e-9)) {
      best_rate = rate;
      best = k;
    }
  }
  return best;
}

}  // namespace specserve
