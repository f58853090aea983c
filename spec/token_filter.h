// A per-request rule on which tokens may come next, as a grammar implements
// it (constrain/). The sampling layer (spec/logit_rules.h) owns one instance
// per followed sequence: the committed output on a session, and a Clone of
// it advanced through the drafts while a round is verified or proposed. A
// rejection drops the fork, so rollback is a Clone, never an undo.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"

namespace specserve {

// A per-request rule on which tokens may come next (a grammar). One instance
// follows one sequence of generated tokens; Clone forks it (drafts, rollback).
class TokenFilter {
 public:
  virtual ~TokenFilter() = default;
  virtual std::unique_ptr<TokenFilter> Clone() const = 0;
  // Sets logits[t] = -inf for every t in [0, vocab) not allowed next.
  virtual void Mask(float* logits, int32_t vocab) = 0;
  // Moves past `token`. INVALID_ARGUMENT (state unchanged) if it was not allowed.
  virtual absl::Status Advance(int32_t token) = 0;
};

}  // namespace specserve
