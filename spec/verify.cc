#include "spec/verify.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "spec/rng.h"

namespace specserve {

absl::Status ValidateSparseDist(const SparseDist& q, int32_t vocab) {
  if (q.ids.size() != q.probs.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "draft distribution has %d ids but %d probs", q.ids.size(), q.probs.size()));
  }
  if (q.ids.empty()) return absl::InvalidArgumentError("draft distribution is empty");
  double total = 0.0;
  for (size_t j = 0; j < q.ids.size(); ++j) {
    if (q.ids[j] < 0 || q.ids[j] >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrFormat("draft distribution id %d outside vocabulary [0, %d)", q.ids[j], vocab));
    }
    if (!std::isfinite(q.probs[j]) || q.probs[j] < 0.0f) {
      return absl::InvalidArgumentError(
          absl::StrFormat("draft distribution probability %g for id %d is not finite and >= 0",
                          q.probs[j], q.ids[j]));
    }
    total += q.probs[j];
  }
  // Float rounding over 64 entries is ~1e-6; anything far off is not the
  // distribution the token was drawn from.
  if (std::abs(total - 1.0) > 1e-3) {
    return absl::InvalidArgumentError(
        absl::StrFormat("draft distribution sums to %g, not 1", total));
  }
  std::vector<int32_t> sorted = q.ids;
  std::sort(sorted.begin(), sorted.end());
  const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  if (dup != sorted.end()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("draft distribution lists id %d twice", *dup));
  }
  return absl::OkStatus();
}

absl::Status ValidateVerifyInput(const VerifyInput& in) {
  if (in.vocab < 1) {
    return absl::InvalidArgumentError(absl::StrFormat("vocab must be >= 1, got %d", in.vocab));
  }
  if (in.k < 0 || in.k > kMaxVerifyK) {
    return absl::InvalidArgumentError(
        absl::StrFormat("k must be in [0, %d], got %d", kMaxVerifyK, in.k));
  }
  if (in.target_logits == nullptr) return absl::InvalidArgumentError("target_logits is null");
  if (in.k > 0 && (in.draft_tokens == nullptr || in.draft_dists == nullptr)) {
    return absl::InvalidArgumentError("draft_tokens and draft_dists are required when k > 0");
  }
  RETURN_IF_ERROR(Validate(in.params));
  for (int32_t i = 0; i < in.k; ++i) {
    const int32_t d = in.draft_tokens[i];
    if (d < 0 || d >= in.vocab) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "draft token %d at index %d outside vocabulary [0, %d)", d, i, in.vocab));
    }
    const absl::Status s = ValidateSparseDist(in.draft_dists[i], in.vocab);
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat("index %d: %s", i, s.message()));
    }
  }
  return absl::OkStatus();
}

float SparseProb(const SparseDist& q, int32_t id) {
  const size_t n = std::min(q.ids.size(), q.probs.size());
  for (size_t j = 0; j < n; ++j) {
    if (q.ids[j] == id) return q.probs[j];
  }
  return 0.0f;
}

int32_t ResidualSample(const float* p, int32_t vocab, const SparseDist& q, float u) {
  // q's entries by ascending id, merged with the dense scan over x.
  std::vector<std::pair<int32_t, float>> qs;
  qs.reserve(q.ids.size());
  for (size_t j = 0; j < std::min(q.ids.size(), q.probs.size()); ++j) {
    qs.emplace_back(q.ids[j], q.probs[j]);
  }
  std::sort(qs.begin(), qs.end());
  auto residual = [&](int32_t x, size_t& j) -> float {
    while (j < qs.size() && qs[j].first < x) ++j;
    const float qx = (j < qs.size() && qs[j].first == x) ? qs[j].second : 0.0f;
    const float r = p[x] - qx;
    return r > 0.0f ? r : 0.0f;  // NaN -> 0
  };
  double total = 0.0;
  int32_t last = -1;
  size_t j = 0;
  for (int32_t x = 0; x < vocab; ++x) {
    const float r = residual(x, j);
    if (r > 0.0f) {
      total += r;
      last = x;
    }
  }
  if (last < 0) return SampleFromProbs(p, vocab, u);  // p <= q everywhere: see verify.h
  const double target = static_cast<double>(u) * total;
  double cum = 0.0;
  j = 0;
  for (int32_t x = 0; x < last; ++x) {
    const float r = residual(x, j);
    if (r > 0.0f) {
      cum += r;
      if (cum > target) return x;
    }
  }
  return last;
}

namespace {

// The rule on validated input (accepted and next_token).
VerifyResult Decide(const VerifyInput& in) {
  const int32_t vocab = in.vocab, k = in.k;
  auto row = [&](int32_t i) { return in.target_logits + static_cast<size_t>(i) * vocab; };

  if (!(in.params.temperature > 0.0f)) {  // greedy
    for (int32_t i = 0; i < k; ++i) {
      const int32_t best = Argmax(row(i), vocab);
      if (in.draft_tokens[i] != best) return VerifyResult{i, best};
    }
    return VerifyResult{k, Argmax(row(k), vocab)};
  }

  const uint64_t seed = in.params.seed;
  // [vocab] p_i, computed only for the rows reached. Per-thread so a 128k row
  // is not a fresh (page-faulting) allocation on every call.
  thread_local std::vector<float> p;
  for (int32_t i = 0; i < k; ++i) {
    const uint64_t position = in.first_position + static_cast<uint64_t>(i);
    TargetDistribution(row(i), vocab, in.params, &p);
    const int32_t d = in.draft_tokens[i];
    const SparseDist& q = in.draft_dists[i];
    const float qd = SparseProb(q, d);
    if (!(qd > 0.0f)) {  // d was not drawn from q: ignore it (see verify.h)
      return VerifyResult{
          i, SampleFromProbs(p.data(), vocab, UniformFloat(seed, position, RngPurpose::kResample))};
    }
    if (AcceptDraftToken(p[d], qd, UniformFloat(seed, position, RngPurpose::kAccept))) continue;
    return VerifyResult{
        i, ResidualSample(p.data(), vocab, q, UniformFloat(seed, position, RngPurpose::kResample))};
  }
  TargetDistribution(row(k), vocab, in.params, &p);
  const uint64_t bonus_position = in.first_position + static_cast<uint64_t>(k);
  return VerifyResult{k, SampleFromProbs(p.data(), vocab,
                                         UniformFloat(seed, bonus_position,
                                                      RngPurpose::kTargetSample))};
}

}  // namespace

absl::StatusOr<VerifyResult> Verify(const VerifyInput& in) {
  RETURN_IF_ERROR(ValidateVerifyInput(in));
  VerifyResult r = Decide(in);
  r.accept_mask = AcceptMask(r.accepted);
  return r;
}

}  // namespace specserve
