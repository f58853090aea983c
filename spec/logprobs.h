// Log-probabilities of committed tokens under the target model
// (docs/http_api.md "Logprobs"). Like vLLM's default ("raw" logprobs), they
// are the log-softmax of the target's logits row as the model produced it:
// before temperature, top-k and top-p, so the same token at the same
// position has the same logprob whatever the sampling rule. Computed only
// when a request asks for them.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/tokenizer.h"

namespace specserve {

// OpenAI's limit on alternatives per token (top_logprobs, logprobs).
inline constexpr int32_t kMaxTopLogprobs = 20;

struct TopLogprob {
  TokenId id = 0;
  float logprob = 0;
};

// One committed token: its logprob and the `top_n` most likely tokens at its
// position (most likely first, equal logits by lower id; the token itself is
// among them only if it ranks there).
struct TokenLogprob {
  TokenId id = 0;
  float logprob = 0;
  std::vector<TopLogprob> top;  // [top_n]
};

// row: [vocab] logits. logprob(t) = row[t] - log(sum_j exp(row[j])), in
// double. INVALID_ARGUMENT for an empty row, `token` outside it, `top_n`
// outside [0, kMaxTopLogprobs], or a row with no finite maximum (NaN, all -inf).
absl::StatusOr<TokenLogprob> TokenLogprobFromLogits(absl::Span<const float> row, TokenId token, int32_t top_n);

// One verified round: logits [rows, vocab] from the verify pass over
// [pending, d1..dK] (rows = K + 1); tokens [n + 1] the committed d1..dn, x,
// token i scored by row i. Returns [n + 1]. INVALID_ARGUMENT as above, or
// for more tokens than rows.
absl::StatusOr<std::vector<TokenLogprob>> RoundLogprobs(const float* logits, int32_t rows, int32_t vocab,
                                                        absl::Span<const TokenId> tokens, int32_t top_n);

}  // namespace specserve
