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

absl::Status NgramDrafter::Commit(const Verdict& v) {
  RETURN_IF_ERROR(seq_.CheckCommit(v, static_cast<int32_t>(proposed_.size()), std::numeric_limits<int32_t>::max()));
  seq_.Commit(absl::MakeConstSpan(proposed_).first(v.accepted), v.next_token);
  if (filter_ != nullptr) {
    for (int32_t i = 0; i <= v.accepted; ++i) {
      filter_->Advance(i < v.accepted ? proposed_[i] : v.next_token).IgnoreError();
    }
  }
  proposed_.clear();
  return absl::OkStatus();
}

absl::StatusOr<Proposal> NgramDrafter::Propose(int64_t round, int32_t k) {
  RETURN_IF_ERROR(seq_.ExpectRound(round));
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
