#include "spec/sampling.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "absl/strings/str_format.h"
#include "spec/rng.h"

namespace specserve {
namespace {

// The ranking order (logit descending, then id ascending) packed into one
// integer so selection and sorting compare plain uint64s in a contiguous
// array: high word = the logit's bits mapped so unsigned order is float order
// (NaN as -inf, -0 as +0), low word = ~id. Larger key = ranks earlier.
inline uint64_t RankKey(float logit, int32_t id) {
  if (!(logit == logit)) logit = -INFINITY;
  if (logit == 0.0f) logit = 0.0f;
  uint32_t bits;
  std::memcpy(&bits, &logit, sizeof(bits));
  bits = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return (static_cast<uint64_t>(bits) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(id));
}
inline int32_t KeyId(uint64_t key) {
  return static_cast<int32_t>(0xFFFFFFFFu - static_cast<uint32_t>(key));
}
constexpr std::greater<uint64_t> kBefore;

// e = expf((logit - max_logit) / temperature), NaN mapped to 0.
inline float Weight(float logit, float max_logit, float temperature) {
  const float e = std::exp((logit - max_logit) / temperature);
  return e == e ? e : 0.0f;
}

// Sum of a dense row in ascending index order, in double.
double DenseSum(const float* v, int32_t n) {
  double s = 0.0;
  for (int32_t i = 0; i < n; ++i) s += v[i];
  return s;
}

// The m best rank keys, in no particular order, in one pass over the row:
// a key enters the buffer only if it beats the m-th best kept so far, and the
// buffer is cut back to m when it fills, so for m << vocab almost every token
// costs one comparison. out is per-thread scratch owned by the caller.
void SelectTop(const float* logits, int32_t vocab, size_t m, std::vector<uint64_t>* out) {
  out->clear();
  if (m >= static_cast<size_t>(vocab)) {
    for (int32_t i = 0; i < vocab; ++i) out->push_back(RankKey(logits[i], i));
    return;
  }
  const size_t limit = 2 * m + 256;
  uint64_t floor = 0;  // every key is > 0 (even -inf maps to 0x007fffff << 32)
  float floor_logit = -INFINITY;  // the floor's logit: a cheap float pre-test
  for (int32_t i = 0; i < vocab; ++i) {
    if (logits[i] < floor_logit) continue;  // false for NaN: those take the exact test
    const uint64_t key = RankKey(logits[i], i);
    if (key <= floor) continue;
    out->push_back(key);
    if (out->size() >= limit) {
      std::nth_element(out->begin(), out->begin() + (m - 1), out->end(), kBefore);
      out->resize(m);
      floor = (*out)[m - 1];
      floor_logit = logits[KeyId(floor)];
    }
  }
  if (out->size() > m) {
    std::nth_element(out->begin(), out->begin() + (m - 1), out->end(), kBefore);
    out->resize(m);
  }
}

std::vector<uint64_t>& Scratch() {
  thread_local std::vector<uint64_t> keys;
  return keys;
}

// The rank key of the last token top-p keeps: the smallest prefix of the
// `pool` best tokens whose weight e reaches target. The prefix is found by
// selecting and sorting the best 256, 1024, ... (for real models the nucleus
// is usually a few dozen tokens out of 128k), summing e in rank order.
uint64_t TopPCutoff(const float* logits, int32_t vocab, size_t pool, const float* e,
                    double target) {
  std::vector<uint64_t>& cand = Scratch();
  for (size_t m = std::min<size_t>(pool, 256);; m = std::min(pool, m * 4)) {
    SelectTop(logits, vocab, m, &cand);
    std::sort(cand.begin(), cand.end(), kBefore);
    double cum = 0.0;
    for (uint64_t key : cand) {
      cum += e[KeyId(key)];
      if (cum >= target) return key;
    }
    if (m == pool) return cand.back();  // not reached at all: rounding; keep the pool
  }
}

}  // namespace

absl::Status Validate(const SamplingParams& params) {
  if (!std::isfinite(params.temperature) || params.temperature < 0.0f) {
    return absl::InvalidArgumentError(
        absl::StrFormat("temperature must be finite and >= 0, got %g", params.temperature));
  }
  if (params.top_k < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("top_k must be >= 0 (0 = off), got %d", params.top_k));
  }
  if (!(params.top_p > 0.0f && params.top_p <= 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("top_p must be in (0, 1], got %g", params.top_p));
  }
  if (!(params.min_p >= 0.0f && params.min_p <= 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("min_p must be in [0, 1], got %g", params.min_p));
  }
  return absl::OkStatus();
}

int32_t Argmax(const float* values, int32_t n) {
  int32_t best = 0;
  float best_value = -INFINITY;
  for (int32_t i = 0; i < n; ++i) {
    if (values[i] > best_value) {  // strict: the first of equal values wins
      best_value = values[i];
      best = i;
    }
  }
  return best;
}

void TargetDistribution(const float* logits, int32_t vocab, const SamplingParams& params,
                        std::vector<float>* probs) {
  probs->assign(std::max<int32_t>(vocab, 0), 0.0f);
  if (vocab <= 0) return;
  float* e = probs->data();  // holds the unnormalised weights e_i until the end
  const int32_t best = Argmax(logits, vocab);
  const float max_logit = logits[best];
  const float t = params.temperature;
  if (!(t > 0.0f) || !std::isfinite(max_logit)) {
    e[best] = 1.0f;  // greedy, or a row with no finite maximum
    return;
  }
  const bool use_top_k = params.top_k > 0 && params.top_k < vocab;
  const bool use_top_p = params.top_p < 1.0f;
  if (!use_top_k) {
    for (int32_t i = 0; i < vocab; ++i) e[i] = Weight(logits[i], max_logit, t);
  } else {
    std::vector<uint64_t>& cand = Scratch();
    SelectTop(logits, vocab, params.top_k, &cand);
    for (uint64_t key : cand) e[KeyId(key)] = Weight(logits[KeyId(key)], max_logit, t);
  }
  if (params.min_p > 0.0f) {
    for (int32_t i = 0; i < vocab; ++i) {
      if (e[i] < params.min_p) e[i] = 0.0f;  // e_max = 1: the argmax always stays
    }
  }
  if (use_top_p) {
    const size_t pool = use_top_k ? params.top_k : vocab;
    const double target = static_cast<double>(params.top_p) * DenseSum(e, vocab);
    const uint64_t cutoff = TopPCutoff(logits, vocab, pool, e, target);
    const float cutoff_logit = logits[KeyId(cutoff)];
    for (int32_t i = 0; i < vocab; ++i) {
      if (e[i] == 0.0f || logits[i] > cutoff_logit) continue;  // cheap float pre-test
      if (RankKey(logits[i], i) < cutoff) e[i] = 0.0f;
    }
  }
  const double total = DenseSum(e, vocab);  // >= 1: the argmax has weight expf(0)
  for (int32_t i = 0; i < vocab; ++i) {
    e[i] = static_cast<float>(static_cast<double>(e[i]) / total);
  }
}

int32_t SampleFromProbs(const float* probs, int32_t n, float u) {
  double total = 0.0;
  int32_t last = -1;
  for (int32_t i = 0; i < n; ++i) {
    if (probs[i] > 0.0f) {  // NaN and negative weights count as 0
      total += probs[i];
      last = i;
    }
  }
  if (last < 0) return -1;
  const double target = static_cast<double>(u) * total;
  double cum = 0.0;
  for (int32_t i = 0; i < last; ++i) {
    if (!(probs[i] > 0.0f)) continue;
    cum += probs[i];
    if (cum > target) return i;
  }
  return last;
}

int32_t Sampler::Sample(const float* logits, int32_t vocab, uint64_t position) {
  if (!(params_.temperature > 0.0f)) return Argmax(logits, vocab);
  TargetDistribution(logits, vocab, params_, &probs_);
  return SampleFromProbs(probs_.data(), vocab,
                         UniformFloat(params_.seed, position, RngPurpose::kTargetSample));
}

int32_t SampleToken(const float* logits, int32_t vocab, const SamplingParams& params,
                    uint64_t position) {
  Sampler sampler(params);
  return sampler.Sample(logits, vocab, position);
}

SparseDist DraftDistribution(const float* logits, int32_t vocab, float temperature,
                             int32_t top_n, float top_p, float min_p) {
  SparseDist out;
  if (vocab <= 0) return out;
  const int32_t best = Argmax(logits, vocab);
  if (!(temperature > 0.0f) || !std::isfinite(logits[best])) {
    out.ids = {best};
    out.probs = {1.0f};
    return out;
  }
  const int32_t n = std::clamp(top_n, 1, vocab);
  std::vector<uint64_t>& cand = Scratch();
  SelectTop(logits, vocab, n, &cand);
  std::sort(cand.begin(), cand.end(), kBefore);
  // Weights and sums in the stored (descending) order.
  const float max_logit = logits[best];
  std::vector<float> e(n);
  double total = 0.0;
  for (int32_t i = 0; i < n; ++i) {
    e[i] = Weight(logits[KeyId(cand[i])], max_logit, temperature);
    if (min_p > 0.0f && e[i] < min_p) e[i] = 0.0f;
    total += e[i];
  }
  int32_t keep = n;
  if (top_p < 1.0f) {
    const double target = static_cast<double>(top_p) * total;
    double cum = 0.0;
    for (int32_t i = 0; i < n; ++i) {
      cum += e[i];
      if (cum >= target) {
        keep = i + 1;
        break;
      }
    }
  }
  double kept = 0.0;
  for (int32_t i = 0; i < keep; ++i) kept += e[i];
  for (int32_t i = 0; i < keep; ++i) {
    const float p = static_cast<float>(static_cast<double>(e[i]) / kept);
    if (p > 0.0f) {
      out.ids.push_back(KeyId(cand[i]));
      out.probs.push_back(p);
    }
  }
  return out;
}

int32_t SampleSparse(const SparseDist& dist, float u) {
  const int32_t n = static_cast<int32_t>(std::min(dist.ids.size(), dist.probs.size()));
  const int32_t i = SampleFromProbs(dist.probs.data(), n, u);
  return i < 0 ? -1 : dist.ids[i];
}

}  // namespace specserve
