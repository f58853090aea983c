#include "coordinator/ngram_drafter.h"

#include <chrono>
#include <limits>

#include "common/status_macros.h"

namespace specserve {

absl::Status NgramDrafter::Open(const SessionSpec& spec) {
  if (spec.prompt.empty()) return absl::InvalidArgumentError("empty prompt");
  seq_.Reset(spec.prompt);
  proposed_.clear();
  behind_round_ = 0;
  behind_proposed_ = false;
  filter_prototype_ = spec.rules.filter;  // kept: a filter may refer to its prototype's tables
  filter_ = filter_prototype_ != nullptr ? filter_prototype_->Clone() : nullptr;
  // A resumed session's prompt ends with output the filter must have seen:
  // the filter then follows from here, which only costs proposals.
  return behind_ ? behind_->Open(spec) : absl::OkStatus();
}

absl::Status NgramDrafter::Commit(const Verdict& v) {
  RETURN_IF_ERROR(seq_.CheckCommit(v, static_cast<int32_t>(proposed_.size()), std::numeric_limits<int32_t>::max()));
  seq_.Commit(absl::MakeConstSpan(proposed_).first(v.accepted), v.next_token);
  if (filter_ != nullptr) {
    for (int32_t i = 0; i <= v.accepted; ++i) {
      filter_->Advance(i < v.accepted ? proposed_[i] : v.next_token).IgnoreError();
    }
  }
  absl::Status s = absl::OkStatus();
  if (behind_ && behind_proposed_) {
    s = behind_->Commit(Verdict{behind_round_++, v.accepted, v.next_token});
  } else if (behind_) {
    for (int32_t i = 0; i <= v.accepted && s.ok(); ++i) {
      s = behind_->Commit(Verdict{behind_round_++, 0, i < v.accepted ? proposed_[i] : v.next_token});
    }
  }
  proposed_.clear();
  behind_proposed_ = false;
  return s;
}

absl::StatusOr<Proposal> NgramDrafter::Propose(int64_t round, int32_t k) {
  RETURN_IF_ERROR(seq_.ExpectRound(round));
  const auto t0 = std::chrono::steady_clock::now();
  Proposal p = LookupProposal(seq_.tokens(), k, max_ngram_, min_ngram_, filter_.get());
  if (p.tokens.empty() && behind_) {
    ASSIGN_OR_RETURN(p, behind_->Propose(behind_round_, k));
    behind_proposed_ = true;
  } else if (behind_) {
    p.looked_up = true;
    // In front of a remote drafter the loop reads this as the block's own time.
    p.compute_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  proposed_ = p.tokens;
  return p;
}

void NgramDrafter::Close() {
  seq_.Reset({});
  if (behind_) behind_->Close();
}

}  // namespace specserve
