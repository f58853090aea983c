// Goodness-of-fit helpers shared by the statistical tests (sampling_test,
// verify_stats_test) and a dense-to-sparse conversion for the verifier tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "spec/sampling.h"

namespace specserve::testing {

// Upper regularized incomplete gamma Q(a, x) (Numerical Recipes 6.2): the
// chi-square survival function is Q(dof / 2, chi2 / 2).
inline double GammaQ(double a, double x) {
  if (x <= 0.0) return 1.0;
  const double log_front = -x + a * std::log(x) - std::lgamma(a);
  if (x < a + 1.0) {  // series for P(a, x)
    double ap = a, term = 1.0 / a, sum = term;
    for (int n = 0; n < 10000 && std::abs(term) > std::abs(sum) * 1e-16; ++n) {
      ap += 1.0;
      term *= x / ap;
      sum += term;
    }
    return 1.0 - sum * std::exp(log_front);
  }
  constexpr double kTiny = 1e-300;  // continued fraction, modified Lentz
  double b = x + 1.0 - a, c = 1.0 / kTiny, d = 1.0 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::abs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::abs(delta - 1.0) < 1e-16) break;
  }
  return std::exp(log_front) * h;
}

// Pearson chi-square p-value of counts against probs, one cell per entry
// (cells with p = 0 are skipped and must be empty: the caller checks them).
inline double ChiSquarePValue(const std::vector<int64_t>& counts, const std::vector<float>& probs) {
  int64_t n = 0;
  for (int64_t c : counts) n += c;
  double chi2 = 0.0;
  int cells = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] <= 0.0f) continue;
    const double expected = static_cast<double>(n) * probs[i];
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
    ++cells;
  }
  return cells < 2 ? 1.0 : GammaQ(0.5 * (cells - 1), 0.5 * chi2);
}

// Pearson chi-square p-value with cells pooled, smallest first, to expected
// >= 5; cells of probability 0 are skipped (the caller checks they are empty).
inline double PooledChiSquarePValue(const std::vector<int64_t>& counts, const std::vector<double>& probs) {
  int64_t n = 0;
  for (int64_t c : counts) n += c;
  std::vector<std::pair<double, double>> cells;  // (expected, observed)
  for (size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] > 0.0) cells.emplace_back(n * probs[i], static_cast<double>(counts[i]));
  }
  std::sort(cells.begin(), cells.end());
  std::vector<std::pair<double, double>> pooled;
  std::pair<double, double> group{0.0, 0.0};
  for (const auto& [e, o] : cells) {
    group.first += e;
    group.second += o;
    if (group.first >= 5.0) {
      pooled.push_back(group);
      group = {0.0, 0.0};
    }
  }
  if (group.first > 0.0) {
    if (pooled.empty()) return 1.0;
    pooled.back().first += group.first;
    pooled.back().second += group.second;
  }
  double chi2 = 0.0;
  for (const auto& [e, o] : pooled) chi2 += (o - e) * (o - e) / e;
  return pooled.size() < 2 ? 1.0 : GammaQ(0.5 * (pooled.size() - 1), 0.5 * chi2);
}

// A dense distribution as the sparse list of its nonzero entries.
inline SparseDist FromDense(const std::vector<float>& p) {
  SparseDist q;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] > 0.0f) {
      q.ids.push_back(static_cast<int32_t>(i));
      q.probs.push_back(p[i]);
    }
  }
  return q;
}

}  // namespace specserve::testing
