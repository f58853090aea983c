#include "spec/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace specserve {

absl::StatusOr<TokenLogprob> TokenLogprobFromLogits(absl::Span<const float> row, TokenId token, int32_t top_n) {
  const int64_t vocab = static_cast<int64_t>(row.size());
  if (vocab < 1) return absl::InvalidArgumentError("empty logits row");
  if (token < 0 || token >= vocab) {
    return absl::InvalidArgumentError(absl::StrCat("token id ", token, " outside the vocabulary [0, ", vocab, ")"));
  }
  if (top_n < 0 || top_n > kMaxTopLogprobs) {
    return absl::InvalidArgumentError(absl::StrCat("top_logprobs ", top_n, " not in [0, ", kMaxTopLogprobs, "]"));
  }
  double max = -INFINITY;
  for (float v : row) {
    if (std::isnan(v)) return absl::InvalidArgumentError("logits row holds NaN");
    max = std::max<double>(max, v);
  }
  if (!std::isfinite(max)) return absl::InvalidArgumentError("logits row has no finite maximum");
  double sum = 0;
  for (float v : row) sum += std::exp(static_cast<double>(v) - max);
  const double log_z = max + std::log(sum);
  auto logprob = [&](TokenId id) { return static_cast<float>(static_cast<double>(row[id]) - log_z); };

  TokenLogprob out;
  out.id = token;
  out.logprob = logprob(token);
  if (top_n == 0) return out;
  // Higher logit first, equal logits by lower id.
  auto before = [&](TokenId a, TokenId b) { return row[a] > row[b] || (row[a] == row[b] && a < b); };
  std::vector<TokenId> best;  // sorted by `before`, at most top_n
  best.reserve(top_n + 1);
  for (TokenId id = 0; id < vocab; ++id) {
    if (static_cast<int32_t>(best.size()) == top_n && !before(id, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), id, before), id);
    if (static_cast<int32_t>(best.size()) > top_n) best.pop_back();
  }
  out.top.reserve(best.size());
  for (TokenId id : best) out.top.push_back({id, logprob(id)});
  return out;
}

absl::StatusOr<std::vector<TokenLogprob>> RoundLogprobs(const float* logits, int32_t rows, int32_t vocab,
                                                        absl::Span<const TokenId> tokens, int32_t top_n) {
  if (logits == nullptr || vocab < 1) return absl::InvalidArgumentError("no logits");
  if (static_cast<int64_t>(tokens.size()) > rows) {
    return absl::InvalidArgumentError(absl::StrCat(tokens.size(), " tokens but ", rows, " logits rows"));
  }
  std::vector<TokenLogprob> out;
  out.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const absl::Span<const float> row(logits + i * static_cast<size_t>(vocab), static_cast<size_t>(vocab));
    ASSIGN_OR_RETURN(TokenLogprob t, TokenLogprobFromLogits(row, tokens[i], top_n));
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace specserve
