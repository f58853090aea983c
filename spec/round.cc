#include "spec/round.h"

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
  if (spec.top_logprobs < 0 || spec.top_logprobs > kMaxTopLogprobs) {
    return absl::InvalidArgumentError(absl::StrCat("top_logprobs ", spec.top_logprobs, " not in [0, ", kMaxTopLogprobs, "]"));
  }
  RETURN_IF_ERROR(ValidateLogitRules(spec.rules, c.vocab));
  return absl::OkStatus();
}

}  // namespace specserve
