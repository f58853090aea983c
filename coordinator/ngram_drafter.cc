#include "coordinator/ngram_drafter.h"

#include <limits>

#include "common/status_macros.h"
#include "spec/prompt_lookup.h"

namespace specserve {

absl::Status NgramDrafter::Open(const SessionSpec& spec) {
  if (spec.prompt.empty()) return absl::InvalidArgumentError("empty prompt");
  seq_.Reset(spec.prompt);
  proposed_.clear();
  return absl::OkStatus();
}

absl::StatusOr<Proposal> NgramDrafter::Propose(int64_t round, const std::optional<RoundResult>& last, int32_t k) {
  RETURN_IF_ERROR(seq_.ExpectRound(round));
  RETURN_IF_ERROR(seq_.CheckVerdict(round, last, static_cast<int32_t>(proposed_.size()),
                                    std::numeric_limits<int32_t>::max()));
  if (last.has_value()) {
    seq_.Commit(absl::MakeConstSpan(proposed_).first(last->accepted), last->next_token);
  } else {
    seq_.Skip();
  }
  proposed_ = PromptLookup(seq_.tokens(), k, max_ngram_, min_ngram_);
  Proposal p;
  p.tokens = proposed_;
  for (TokenId t : proposed_) p.dists.push_back(SparseDist{{t}, {1.0f}});
  return p;
}

}  // namespace specserve
