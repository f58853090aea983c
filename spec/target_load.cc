#include "spec/target_load.h"

#include <algorithm>

namespace specserve {

double PassSeconds(const TargetLoad& load, double tokens) {
  const std::vector<PassCostPoint>& p = load.passes;
  const double line = load.fixed_seconds + load.seconds_per_token * tokens;
  double s = line;
  if (!p.empty()) {
    const PassCostPoint& first = p.front();
    const PassCostPoint& last = p.back();
    if (tokens <= first.tokens) {
      s = std::max(load.fixed_seconds, first.seconds - load.seconds_per_token * (first.tokens - tokens));
      s = std::min(s, first.seconds);
    } else if (tokens >= last.tokens) {
      double slope = load.seconds_per_token;
      if (p.size() >= 2) {
        const PassCostPoint& before = p[p.size() - 2];
        slope = std::max(slope, (last.seconds - before.seconds) / (last.tokens - before.tokens));
      }
      s = last.seconds + slope * (tokens - last.tokens);
    } else {
      // The first point at or past `tokens`; p[i - 1] is below it.
      const size_t i = static_cast<size_t>(
          std::lower_bound(p.begin(), p.end(), tokens,
                           [](const PassCostPoint& a, double t) { return a.tokens < t; }) -
          p.begin());
      const PassCostPoint& lo = p[i - 1];
      const PassCostPoint& hi = p[i];
      s = lo.seconds + (hi.seconds - lo.seconds) * (tokens - lo.tokens) / (hi.tokens - lo.tokens);
    }
  }
  return std::max(1e-9, s);
}

}  // namespace specserve
