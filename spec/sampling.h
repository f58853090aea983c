// Sampling rules: logits in, a distribution or a token out. Sampling never
// touches the model (docs/style.md "Sampling"); the same functions serve plain decoding, the
// draft's proposals and the verifier (spec/verify.h).
//
// One total order is used wherever tokens are ranked: by logit descending,
// then by token id ascending ("before" means earlier in this order). NaN
// logits rank as -inf. Ties in top-k, top-p and argmax therefore keep the
// lower id, deterministically, on every backend.
//
// Float arithmetic follows a fixed recipe so a CUDA version can reproduce it
// (to the last ulp where its expf agrees; otherwise a token differs only when
// a uniform lands within rounding distance of a CDF boundary):
//   x_i = (logit_i - max_logit) / temperature   (float, IEEE division)
//   e_i = expf(x_i)                              (float; NaN -> 0)
//   sums of e_i in double, in ascending token id order (top-p's running
//   mass alone runs in rank order, compared with top_p * sum)
//   min_p: token i is dropped when e_i < min_p (float compare; e_max =
//   expf(0) = 1, so this is p_i < min_p * p_max before any renormalising)
//   p_i = float(double(e_i) / sum over the kept tokens)
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace specserve {

using TokenId = int32_t;

// The user's sampling rule. temperature 0 means greedy (top_k, top_p unused).
struct SamplingParams {
  float temperature = 0.0f;  // >= 0, finite
  int32_t top_k = 0;         // 0 = off; k >= vocab is also off
  float top_p = 1.0f;        // (0, 1]; 1 = off
  uint64_t seed = 0;         // keys every random draw (spec/rng.h)
  float min_p = 0.0f;        // [0, 1]; 0 = off (last: keeps positional initialisers valid)
};

// INVALID_ARGUMENT naming the field when a value is out of range.
absl::Status Validate(const SamplingParams& params);

// Index of the largest value, the lowest index among ties; NaN never wins.
// Returns 0 when n <= 0 or every value is NaN or -inf.
int32_t Argmax(const float* values, int32_t n);

// The user's rule applied to one row of logits [vocab]: divide by temperature,
// softmax, drop the tokens with p < min_p * p_max, keep the top_k tokens,
// then keep the smallest prefix (in the order above) whose mass, renormalised
// over the kept set, is >= top_p (at least one token), renormalise. probs is
// resized to vocab, zeros outside the kept set. This is vLLM's order (min_p,
// then top-k, then top-p on the renormalised distribution; min_p and top-k
// commute, both keep a prefix of the ranking). temperature 0: one-hot at
// Argmax (min_p never drops the argmax).
// Cost: O(vocab) plus O(k log k) for top-k; top-p sorts only as many leading
// candidates as it needs (grows 256, 1024, ...), O(vocab log vocab) at worst.
// Logits are expected finite or -inf; any other input still yields a valid
// distribution (NaN logits get probability 0).
void TargetDistribution(const float* logits, int32_t vocab, const SamplingParams& params,
                        std::vector<float>* probs);

// Inverse-CDF draw over ids in ascending order from nonnegative weights
// probs[n] (need not sum exactly to 1): returns the first i with
// cumsum(probs[0..i]) > u * total, sums in double. Never returns an id of
// weight 0: if rounding runs past the end it returns the last id with
// nonzero weight. u in [0, 1). Returns -1 if no weight is positive (never
// the case for a TargetDistribution row).
int32_t SampleFromProbs(const float* probs, int32_t n, float u);

// Plain decoding of the token at absolute `position`: Argmax when greedy,
// else TargetDistribution + SampleFromProbs with
// UniformFloat(seed, position, kTargetSample). Verify with k = 0 returns the
// same token.
int32_t SampleToken(const float* logits, int32_t vocab, const SamplingParams& params,
                    uint64_t position);

// SampleToken with the probability buffer kept between calls (one per thread).
class Sampler {
 public:
  explicit Sampler(const SamplingParams& params) : params_(params) {}
  int32_t Sample(const float* logits, int32_t vocab, uint64_t position);
  const SamplingParams& params() const { return params_; }

 private:
  SamplingParams params_;
  std::vector<float> probs_;  // [vocab] scratch
};

// A sparse draft distribution q: the exact distribution a drafted token was
// sampled from, sent as (id, probability) pairs. ids unique and in
// [0, vocab); probs >= 0 and summing to 1 (to float rounding). A greedy draft
// or an n-gram drafter sends one entry with probability 1.
struct SparseDist {
  std::vector<int32_t> ids;
  std::vector<float> probs;
};

// The largest number of entries a draft distribution carries by default
// (docs/exact_verification.md: the draft truncates to its top-N, N <= 64).
inline constexpr int32_t kDefaultDraftTopN = 64;

// The draft's own rule: keep the top_n tokens (order above, top_n clamped to
// [1, vocab]), softmax over them at `temperature`, drop those with
// e_i < min_p (as TargetDistribution), then keep the smallest
// prefix of mass >= top_p, renormalise. Entries come in descending order
// (sums run in that order); zero-probability entries are dropped. temperature <= 0: one-hot at Argmax.
// Sampling from the returned q with SampleSparse and sending q unchanged is
// what makes verification exact: q must be what was sampled from.
SparseDist DraftDistribution(const float* logits, int32_t vocab, float temperature,
                             int32_t top_n, float top_p, float min_p = 0.0f);

// Inverse-CDF draw over the entries in stored order (same rule as
// SampleFromProbs), -1 if no entry has positive probability. Returns the
// token id. The draft uses UniformFloat(seed, position, kDraftSample) for u.
int32_t SampleSparse(const SparseDist& dist, float u);

}  // namespace specserve
