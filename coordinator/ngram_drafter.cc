#include "coordinator/ngram_drafter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace specserve {

absl::Status NgramDrafter::Open(const SessionSpec& spec) {
  if (spec.prompt.empty()) return absl::InvalidArgumentError("empty prompt");
  tokens_ = spec.prompt;
  proposed_.clear();
  round_ = 0;
  return absl::OkStatus();
}

absl::StatusOr<Proposal> NgramDrafter::Propose(int64_t round, const std::optional<RoundResult>& last, int32_t k) {
  if (round != round_) {
    return absl::FailedPreconditionError(absl::StrCat("round ", round, " refused: expected round ", round_));
  }
  if (last.has_value()) {
    if (last->accepted < 0 || last->accepted > static_cast<int32_t>(proposed_.size())) {
      return absl::InvalidArgumentError("verdict accepts more tokens than were proposed");
    }
    tokens_.insert(tokens_.end(), proposed_.begin(), proposed_.begin() + last->accepted);
    tokens_.push_back(last->next_token);
  } else if (round > 0) {
    return absl::InvalidArgumentError("missing verdict");
  }
  proposed_ = PromptLookup(tokens_, k, max_ngram_, min_ngram_);
  ++round_;
  Proposal p;
  p.tokens = proposed_;
  for (TokenId t : proposed_) p.dists.push_back(SparseDist{{t}, {1.0f}});
  return p;
}

}  // namespace specserve
