#include "spec/committed_sequence.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace specserve {

absl::Status CommittedSequence::ExpectRound(int64_t round) const {
  if (round == round_) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("round ", round, " refused: expected round ", round_));
}

absl::Status CommittedSequence::CheckCommit(const Verdict& v, int32_t proposed, int32_t vocab) const {
  RETURN_IF_ERROR(ExpectRound(v.round));
  if (v.accepted < 0 || v.accepted > proposed || v.next_token < 0 || v.next_token >= vocab) {
    return absl::InvalidArgumentError(absl::StrCat("verdict (round ", v.round, ", accepted ", v.accepted, ", next ",
                                                   v.next_token, ") does not fit round ", v.round, " with ", proposed,
                                                   " proposed tokens"));
  }
  return absl::OkStatus();
}

}  // namespace specserve
