#include "spec/committed_sequence.h"

#include "absl/strings/str_cat.h"

namespace specserve {

absl::Status CommittedSequence::ExpectRound(int64_t round) const {
  if (round == round_) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("round ", round, " refused: expected round ", round_));
}

absl::Status CommittedSequence::CheckVerdict(int64_t round, const std::optional<RoundResult>& last,
                                             int32_t proposed, int32_t vocab) const {
  if (!last.has_value()) {
    if (round == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("round ", round, " needs the verdict of round ", round - 1));
  }
  if (last->round != round - 1 || last->accepted < 0 || last->accepted > proposed || last->next_token < 0 ||
      last->next_token >= vocab) {
    return absl::InvalidArgumentError(absl::StrCat("verdict (round ", last->round, ", accepted ", last->accepted,
                                                   ", next ", last->next_token, ") does not fit round ", round - 1,
                                                   " with ", proposed, " proposed tokens"));
  }
  return absl::OkStatus();
}

}  // namespace specserve
