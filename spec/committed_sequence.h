// The committed sequence, as every role holds it (the draft session, the
// target session, the n-gram drafter): the prompt and every verified token.
// Its last token is the pending one: committed, not yet fed to any model.
// Each round moves it forward by one verdict (docs/round_protocol.md):
// d1..d_accepted of that round's proposal (none in a round nothing was
// proposed for), then next_token.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "spec/round.h"

namespace specserve {

// One round's outcome as every role applies it: d1..d_accepted of the
// round's proposal are committed, then next_token. The coordinator sends it
// to the drafter after each verified round (internal.proto `Commit`).
struct Verdict {
  int64_t round = 0;
  int32_t accepted = 0;
  TokenId next_token = 0;
};

class CommittedSequence {
 public:
  // Starts at round 0 with `prompt` (at least one token; its last is pending).
  void Reset(std::vector<TokenId> prompt) {
    tokens_ = std::move(prompt);
    round_ = 0;
  }

  // FAILED_PRECONDITION unless `round` is the one this side expects next
  // (a stale or repeated round changes nothing).
  absl::Status ExpectRound(int64_t round) const;

  // FAILED_PRECONDITION unless `v` is for the round this side expects next;
  // INVALID_ARGUMENT unless it accepts 0..proposed tokens (`proposed`: the
  // length of that round's proposal, 0 when there was none) and its next
  // token is inside the vocabulary.
  absl::Status CheckCommit(const Verdict& v, int32_t proposed, int32_t vocab) const;

  // Commits d1..dn (`accepted`, a prefix of the round's proposal) and `next`,
  // and moves on to the next round; returns the round just finished.
  int64_t Commit(absl::Span<const TokenId> accepted, TokenId next) {
    tokens_.insert(tokens_.end(), accepted.begin(), accepted.end());
    tokens_.push_back(next);
    return round_++;
  }

  const std::vector<TokenId>& tokens() const { return tokens_; }
  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }
  TokenId pending() const { return tokens_.back(); }
  int64_t next_round() const { return round_; }

 private:
  std::vector<TokenId> tokens_;  // back() is pending
  int64_t round_ = 0;
};

}  // namespace specserve
