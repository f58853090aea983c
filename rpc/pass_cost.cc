#include "rpc/pass_cost.h"

#include <algorithm>
#include <cmath>

namespace specserve::rpc {
namespace {
// ~50 passes of memory: follows a change of load within a second or two of
// decoding, yet spans enough pass shapes (verify blocks of several K,
// batches of several sizes) to separate the fixed and per-token costs.
constexpr double kDecay = 0.98;
constexpr int64_t kExactWidths = 16;

// Widths 1..16 are buckets 0..15; wider ones 16 + floor(log_1.25(T / 16)).
int BucketOf(int64_t tokens) {
  if (tokens <= kExactWidths) return static_cast<int>(tokens - 1);
  const int b = static_cast<int>(kExactWidths) +
                static_cast<int>(std::floor(std::log(static_cast<double>(tokens) / kExactWidths) / std::log(1.25)));
  return std::min(b, PassCostModel::kBuckets - 1);
}
}  // namespace

void PassCostModel::Observe(int64_t tokens, int64_t sessions, double seconds) {
  if (tokens <= 0 || sessions <= 0 || !(seconds >= 0)) return;
  const double x = static_cast<double>(tokens);
  sw_ = sw_ * kDecay + 1;
  sx_ = sx_ * kDecay + x;
  sy_ = sy_ * kDecay + seconds;
  sxx_ = sxx_ * kDecay + x * x;
  sxy_ = sxy_ * kDecay + x * seconds;
  ss_ = ss_ * kDecay + static_cast<double>(sessions);
  ++passes_;
  Bucket& b = buckets_[BucketOf(tokens)];
  const double age = std::pow(kAge, static_cast<double>(passes_ - b.last_pass));
  b.w = b.w * age + 1;
  b.tokens = b.tokens * age + x;
  b.seconds = b.seconds * age + seconds;
  b.last_pass = passes_;
}

TargetLoad PassCostModel::Estimate() const {
  TargetLoad load;
  if (sw_ == 0) return load;
  load.known = true;
  const double mx = sx_ / sw_, my = sy_ / sw_;
  const double var = sxx_ / sw_ - mx * mx;
  // With one pass shape only, the split between fixed and per-token cost is
  // unknown: assume a quarter of the pass is per token (between a GPU, ~0,
  // and a CPU on a small model, ~1), as adaptive K does for its own line, so
  // that K moves, the target sees other shapes, and the fit takes over. (All
  // per token would keep a lone session at K = 0 for good.)
  double slope = var > 1e-6 * mx * mx ? (sxy_ / sw_ - mx * my) / var : 0.25 * my / mx;
  slope = std::clamp(slope, 0.0, my / mx);
  load.seconds_per_token = slope;
  load.fixed_seconds = std::max(0.0, my - slope * mx);
  load.sessions_per_pass = ss_ / sw_;
  load.tokens_per_session = sx_ / ss_;
  for (const Bucket& b : buckets_) {
    if (b.w == 0) continue;
    const double w = b.w * std::pow(kAge, static_cast<double>(passes_ - b.last_pass));
    if (w < kForgetWeight) continue;
    const double tokens = b.tokens / b.w;
    const double line = load.fixed_seconds + load.seconds_per_token * tokens;
    PassCostPoint p{tokens, (w * (b.seconds / b.w) + kPrior * line) / (w + kPrior)};
    if (!load.passes.empty()) p.seconds = std::max(p.seconds, load.passes.back().seconds);
    load.passes.push_back(p);
  }
  return load;
}

}  // namespace specserve::rpc
