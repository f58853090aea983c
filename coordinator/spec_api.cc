#include "coordinator/spec_api.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace specserve {

absl::Status ValidateSessionSpec(const SessionSpec& spec, const ModelConfig& c) {
  if (spec.prompt.empty()) return absl::InvalidArgumentError("empty prompt");
  for (TokenId t : spec.prompt) {
    if (t < 0 || t >= c.vocab) {
      return absl::InvalidArgumentError(absl::StrCat("prompt token id ", t, " is outside the vocabulary [0, ", c.vocab, ")"));
    }
  }
  if (spec.max_new_tokens < 0) return absl::InvalidArgumentError("max_new_tokens must be >= 0");
  if (static_cast<int64_t>(spec.prompt.size()) + spec.max_new_tokens > c.n_ctx) {
    return absl::InvalidArgumentError(absl::StrCat("prompt of ", spec.prompt.size(), " tokens plus max_new_tokens ",
                                                   spec.max_new_tokens, " exceeds the context of ", c.n_ctx));
  }
  RETURN_IF_ERROR(Validate(spec.target));
  if (spec.draft.top_n < 1 || spec.draft.top_n > 64) {
    return absl::InvalidArgumentError(absl::StrCat("draft top_n ", spec.draft.top_n, " not in [1, 64]"));
  }
  if (!(spec.draft.temperature >= 0) || !(spec.draft.top_p > 0 && spec.draft.top_p <= 1)) {
    return absl::InvalidArgumentError("draft temperature must be >= 0 and top_p in (0, 1]");
  }
  if (spec.draft.lookup_min_ngram < 0 || spec.draft.lookup_min_ngram > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft lookup_min_ngram ", spec.draft.lookup_min_ngram, " not in [0, 16]"));
  }
  return absl::OkStatus();
}

std::vector<TokenId> PromptLookup(const std::vector<TokenId>& ctx, int32_t k, int32_t max_ngram, int32_t min_ngram) {
  const int64_t n_ctx = static_cast<int64_t>(ctx.size());
  for (int32_t n = static_cast<int32_t>(std::min<int64_t>(max_ngram, n_ctx - 1)); n >= min_ngram; --n) {
    const TokenId* suffix = ctx.data() + n_ctx - n;
    // Most recent match first: recent text predicts the continuation best.
    for (int64_t start = n_ctx - n - 1; start >= 0; --start) {
      if (!std::equal(suffix, suffix + n, ctx.data() + start)) continue;
      const int64_t from = start + n;
      const int64_t take = std::min<int64_t>(k, n_ctx - from);
      if (take <= 0) continue;
      return std::vector<TokenId>(ctx.begin() + from, ctx.begin() + from + take);
    }
  }
  return {};
}

}  // namespace specserve
