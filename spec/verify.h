// Verification of drafted tokens: speculative sampling as in Leviathan et al.,
// "Fast Inference from Transformers via Speculative Decoding" (ICML 2023,
// Algorithm 1) and Chen et al., "Accelerating Large Language Model Decoding
// with Speculative Sampling" (2023). In vLLM's words (rejection_sampler.py):
// the accepted draft tokens, then one recovered token (after a rejection) or
// one bonus token (after K acceptances).
//
// For i = 1..K, with p_{i-1} = TargetDistribution(target row i-1) and q_i the
// distribution d_i was drawn from: accept d_i with probability
// min(1, p_{i-1}(d_i) / q_i(d_i)). At the first rejection emit
// x ~ normalize(max(0, p_{i-1} - q_i)); after K acceptances emit x ~ p_K.
// Whatever q is, each emitted token is distributed exactly as p given the
// prefix, and a drafted token is accepted with the largest possible
// probability, sum_x min(p(x), q(x)) = 1 - TV(p, q).
//
// One pure function over (target logits, draft tokens, draft distributions,
// seeded draws) (docs/style.md "Verification"). The CUDA verify-and-resample kernel mirrors the
// helpers below; its parity test compares against Verify.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "spec/sampling.h"

namespace specserve {

// The longest block one Verify call accepts (docs/round_protocol.md: K is small; 64 bounds
// the target pass and the message size).
inline constexpr int32_t kMaxVerifyK = 64;

struct VerifyInput {
  // [k + 1, vocab] row-major. Row i: the target's logits after feeding
  // pending, d_1..d_i, i.e. the scores for the token at position
  // first_position + i.
  const float* target_logits = nullptr;
  int32_t vocab = 0;
  int32_t k = 0;                              // drafted tokens, 0..kMaxVerifyK
  const int32_t* draft_tokens = nullptr;      // [k]
  const SparseDist* draft_dists = nullptr;    // [k] q_i, exactly what d_i was drawn from
  SamplingParams params;                      // the target's (the user's) rule
  uint64_t first_position = 0;                // absolute position of d_1
};

struct VerifyResult {
  int32_t accepted = 0;    // n: d_1..d_n are committed
  int32_t next_token = 0;  // x: recovered (n < k) or bonus (n == k), committed after them
  // Per-position accept flags: bit i set when d_{i+1} was accepted (the
  // rule stops at its first rejection, so bits 0..n-1; for the metrics).
  uint64_t accept_mask = 0;
};

// Bits 0..n-1 set (n in [0, 64]).
inline constexpr uint64_t AcceptMask(int32_t n) {
  return n <= 0 ? 0 : n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
}

// Greedy (temperature 0): accept while d_i == Argmax(row i-1); x = Argmax of
// the first mismatching row, or of row k. Speculative output equals plain
// greedy decoding token for token; q is not consulted.
//
// Sampling, for the token at position j = first_position + i - 1:
//   u_a = UniformFloat(seed, j, kAccept); accept iff AcceptDraftToken(p(d_i), q(d_i), u_a).
//   On rejection: x = ResidualSample(p, q, UniformFloat(seed, j, kResample)).
//   Bonus at j = first_position + k: x = SampleFromProbs(p_k,
//   UniformFloat(seed, j, kTargetSample)), the very draw plain decoding
//   (SampleToken) uses, so k = 0 is exactly plain decoding.
// A drafted token absent from its own q (q(d_i) = 0) cannot come from an
// honest draft. It is treated as carrying no information: the position is a
// rejection and x ~ p_{i-1} with the kResample draw. This is the one choice
// that keeps the output exact whenever d_i's true distribution, restricted to
// the support of q, is proportional to q (e.g. a draft that sampled from its
// full softmax but sent only its top-N): x then ignores d_i entirely, while
// "accept if p(d_i) > 0" would bias the output toward d_i and "residual"
// would bias it away from q's support.
//
// INVALID_ARGUMENT for: null pointers, vocab < 1, k outside [0, kMaxVerifyK],
// draft tokens outside [0, vocab), a malformed SparseDist (ValidateSparseDist),
// invalid params (Validate).
absl::StatusOr<VerifyResult> Verify(const VerifyInput& input);

absl::Status ValidateVerifyInput(const VerifyInput& input);

// Checks one draft distribution: ids and probs the same non-zero length; ids
// in [0, vocab) and unique; probs finite and >= 0; total within 1e-3 of 1.
absl::Status ValidateSparseDist(const SparseDist& q, int32_t vocab);

// --- The pieces a device implementation mirrors -------------------------

// q(id), 0 when id is not listed. Linear scan: q has at most a few dozen entries.
float SparseProb(const SparseDist& q, int32_t id);

// The accept test for a drafted token with p = p(d) and q = q(d) > 0, u in
// [0, 1): u < p / q. The division is IEEE float (no fast-math
// reciprocal on the device): p >= q gives a ratio >= 1 and always accepts;
// p = 0 (e.g. d outside the target's top-k or top-p) always rejects, because
// the comparison is strict.
inline bool AcceptDraftToken(float p, float q, float u) { return u < p / q; }

// x ~ normalize(max(0, p - q)) by inverse CDF over ascending ids:
// r_x = max(0, p[x] - q(x)) in float, sums in double, target u * sum(r).
// p is a dense row [vocab]; q is sparse. Every x with r_x > 0 has p[x] > 0,
// so the result always lies in the target's support.
//
// If the residual has no mass (sum(r) == 0: p <= q everywhere, i.e. p == q up
// to float rounding) it samples from p with the same u. In exact arithmetic
// this branch has probability zero: a rejection needs some d with
// p(d) < q(d), and the rejection probability sum_d q(d)(1 - p(d)/q(d))^+ =
// sum_x (q(x) - p(x))^+ = sum_x (p(x) - q(x))^+ equals the residual's mass, so
// a massless residual means no rejection can happen. Only rounding (mass of
// order 1e-7) reaches it, so whatever is drawn there shifts the output
// distribution by at most that much; drawing from p keeps the token valid and
// inside the target's support (never a token top-k or top-p excluded).
int32_t ResidualSample(const float* p, int32_t vocab, const SparseDist& q, float u);

}  // namespace specserve
