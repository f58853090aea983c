#include "coordinator/ngram_drafter.h"

#include <limits>

#include "common/status_macros.h"
#include "spec/prompt_lookup.h"

namespace specserve {

absl::Status NgramDrafter::Open(const SessionSpec& spec) {
  if (spec.prompt.empty()) return absl::InvalidArgumentError("empty prompt");
  seq_.Reset(spec.prompt);
  proposed_.clear();
  filter_prototype_ = spec.rules.filter;  // kept: a filter may refer to its prototype's tables
  filter_ = filter_prototype_ != nullptr ? filter_prototype_->Clone() : nullptr;
  // A resumed session's prompt ends with output the filter must have seen:
  // the filter then follows from here, which only costs proposals.
  return absl::OkStatus();
}

absl::StatusOr<Proposal> NgramDrafter::Propose(int64_t round, const std::optional<RoundResult>& last, int32_t k) {
  RETURN_IF_ERROR(seq_.ExpectRound(round));
  RETURN_IF_ERROR(seq_.CheckVerdict(round, last, static_cast<int32_t>(proposed_.size()),
                                    std::numeric_limits<int32_t>::max()));
  if (last.has_value()) {
    seq_.Commit(absl::MakeConstSpan(proposed_).first(last->accepted), last->next_token);
    if (filter_ != nullptr) {
      for (int32_t i = 0; i <= last->accepted; ++i) {
        filter_->Advance(i < last->accepted ? proposed_[i] : last->next_token).IgnoreError();
      }
    }
  } else {
    seq_.Skip();
  }
  proposed_ = PromptLookup(seq_.tokens(), k, max_ngram_, min_ngram_);
  if (filter_ != nullptr && !proposed_.empty()) {
    std::unique_ptr<TokenFilter> fork = filter_->Clone();
    size_t allowed = 0;
    while (allowed < proposed_.size() && fork->Advance(proposed_[allowed]).ok()) ++allowed;
    proposed_.resize(allowed);
  }
  Proposal p;
  p.tokens = proposed_;
  for (TokenId t : proposed_) p.dists.push_back(SparseDist{{t}, {1.0f}});
  return p;
}

}  // namespace specserve
