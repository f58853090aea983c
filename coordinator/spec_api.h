// The two roles of speculative decoding as the round loop sees them. The
// in-process engines (coordinator/local_engines.h) and the gRPC clients
// (coordinator/remote_engines.h) implement these, so the loop in
// coordinator/round_loop.h is the same code in one process and across three.
//
// The round (DESIGN.md): both sides hold the committed sequence except its
// last token, the pending one. Propose feeds pending and samples d1..dK;
// Verify runs the target over [pending, d1..dK] and returns how many were
// accepted (n) and the next token x; the draft hears (n, x) with the next
// Propose and rolls back to the same committed sequence.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model_config.h"
#include "common/sampling.h"

namespace specserve {

// The draft model's own sampling rule (DESIGN: it may truncate to its top-N
// and its own top-p; q is sent exactly, so the output stays exact).
struct DraftRule {
  float temperature = 0.0f;             // 0: greedy draft, one-hot q
  int32_t top_n = kDefaultDraftTopN;    // 1..64
  float top_p = 1.0f;
  // 0: off. N > 0 with a greedy draft: when the last N or more committed
  // tokens occurred earlier in the context, propose what followed them
  // (prompt lookup, one-hot q) instead of running the draft model; the draft
  // catches up on those tokens in one batched pass in a later round.
  int32_t lookup_min_ngram = 0;         // 0..16
};

struct SessionSpec {
  std::vector<TokenId> prompt;  // ids, BOS included; at least one token
  SamplingParams target;        // the user's rule; verification is exact for it
  DraftRule draft;
  int32_t max_new_tokens = 0;   // lets a service refuse what cannot fit its context
};

// K drafted tokens and, for each, exactly the distribution it was drawn from.
struct Proposal {
  std::vector<TokenId> tokens;   // [K]
  std::vector<SparseDist> dists; // [K]
  double compute_seconds = 0;    // spent on the draft's passes (the rest of a call is transport)
  bool drafted_ahead = false;    // drafted during the previous verify (overlap guess held)
  bool looked_up = false;        // prompt lookup in the draft session, not the draft model
};

// A verified round: d1..d_accepted are committed, then next_token.
struct RoundResult {
  int64_t round = 0;
  int32_t accepted = 0;
  TokenId next_token = 0;
  double compute_seconds = 0;    // spent in the target's pass and verification
};

// INVALID_ARGUMENT naming what is wrong: empty prompt, ids outside the
// vocabulary, prompt + max_new_tokens past the context, bad sampling rules.
absl::Status ValidateSessionSpec(const SessionSpec& spec, const ModelConfig& config);

// Prompt lookup (Saxena 2023): the tokens (at most k) that followed the most
// recent earlier occurrence of the longest suffix of ctx of max_ngram down to
// min_ngram tokens; empty when there is none.
std::vector<TokenId> PromptLookup(const std::vector<TokenId>& ctx, int32_t k, int32_t max_ngram, int32_t min_ngram);

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual absl::Status Open(const SessionSpec& spec) = 0;
  // Applies `last` (the previous round's verdict; nullopt in round 0) and
  // proposes k tokens for `round`. A stale or repeated round is refused with
  // FAILED_PRECONDITION and changes nothing.
  virtual absl::StatusOr<Proposal> Propose(int64_t round, const std::optional<RoundResult>& last,
                                           int32_t k) = 0;
  virtual void Close() = 0;
  virtual std::string kind() const = 0;  // "model", "ngram"
  // Overlap (DESIGN "Overlap"): called right after Propose, on another thread
  // while the target verifies, to draft the next round on the guess that all
  // of this one is accepted. The next Propose uses that block if the verdict
  // matches the guess. Optional: the default does nothing.
  virtual void PrepareAhead(int32_t k) {}
};

class Verifier {
 public:
  virtual ~Verifier() = default;
  virtual absl::Status Open(const SessionSpec& spec) = 0;
  // Verifies `p` (K = p.tokens.size(), 0 allowed: a plain decoding step).
  virtual absl::StatusOr<RoundResult> Verify(int64_t round, const Proposal& p) = 0;
  virtual void Close() = 0;
};

}  // namespace specserve
