#include "coordinator/k_cost_model.h"

#include <algorithm>
#include <cmath>

namespace specserve {

void DecayedLine::Add(double x, double y, double decay) {
  sw = sw * decay + 1;
  sx = sx * decay + x;
  sy = sy * decay + y;
  sxx = sxx * decay + x * x;
  sxy = sxy * decay + x * y;
}

void DecayedLine::Scale(double f) {
  sw *= f;
  sx *= f;
  sy *= f;
  sxx *= f;
  sxy *= f;
}

double DecayedLine::At(double x, double lone_slope) const {
  if (sw == 0) return 0;
  const double mx = sx / sw, my = sy / sw;
  const double var = sxx / sw - mx * mx;
  double slope = var > 1e-9 ? (sxy / sw - mx * my) / var : lone_slope * my / mx;
  slope = std::max(0.0, slope);
  return std::max(1e-9, my + slope * (x - mx));
}

double KCostModel::ExpectedTokens(int32_t k) const {
  const double a = std::clamp(Acceptance(), 0.01, 0.995);
  return (1 - std::pow(a, k + 1)) / (1 - a);
}

// Until two pass widths are seen: a quarter of a pass per extra token
// (between a GPU's ~0 and a CPU's ~1), so that adaptive K tries another K
// instead of locking onto its first.
double KCostModel::VerifySeconds(int32_t n) const { return in_.verify.At(n, 0.25); }

// Until two K are seen all of the wait counts per drafted token: the dearer
// guess for a larger K; a second K fits the fixed part.
double KCostModel::OnDemandDraftSeconds(int32_t k) const { return k <= 0 ? 0 : in_.draft.At(k, 1.0); }

double KCostModel::DraftSeconds(int32_t k) const {
  if (k <= 0) return 0;
  const double on_demand = in_.draft.At(k, 1.0);
  if (in_.ahead_chances <= 0 || in_.ahead_hits <= 0) return on_demand;
  const double g = in_.ahead_hits / in_.ahead_chances;
  const double h = std::pow(std::clamp(Acceptance(), 0.0, 1.0), k) * g;
  return (1 - h) * on_demand + h * in_.ahead_wait;
}

double KCostModel::batch() const { return std::max(1.0, in_.load.sessions_per_pass); }
double KCostModel::sessions() const { return std::max(1.0, in_.load.active_sessions); }

double KCostModel::RoundSeconds(int32_t k) const {
  if (!in_.load.known) return VerifySeconds(k + 1) + DraftSeconds(k);
  const double pass = PassSeconds(in_.load, batch() * (k + 1));
  const double latency = in_.network_seconds + pass + DraftSeconds(k);
  const double throughput = sessions() / batch() * pass;
  return std::max(latency, throughput);
}

double KCostModel::Rate(int32_t k) const { return ExpectedTokens(k) / std::max(1e-9, RoundSeconds(k)); }

}  // namespace specserve
