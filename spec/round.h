// The round's types, shared by the draft and target sessions (spec/), the
// wire conversion (rpc/) and the coordinator's loop.
//
// The round (docs/round_protocol.md): both sides hold the committed sequence except its
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
#include "spec/logit_rules.h"
#include "spec/logprobs.h"
#include "spec/sampling.h"
#include "spec/target_load.h"

namespace specserve {

// The most tokens one round may draft: the API's k, adaptive K's ceiling, and
// what every session's KV reservation leaves room for.
inline constexpr int32_t kMaxRoundK = 16;

// The draft model's own sampling rule (docs/exact_verification.md: it may truncate to its top-N
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
  // The target returns each committed token's logprob (spec/logprobs.h) and
  // its top_logprobs (0..kMaxTopLogprobs) alternatives. Off: no cost.
  bool logprobs = false;
  int32_t top_logprobs = 0;
  // Constraints on the output (spec/logit_rules.h): applied to the target's
  // rows before verification and to the draft's rows before q.
  LogitRules rules;

  // A session whose rows must be transformed, or whose rule the device
  // kernels do not implement (min_p), samples and verifies on the host.
  bool host_sampling() const { return rules.active() || target.min_p > 0.0f; }
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
  // With SessionSpec::logprobs: [accepted + 1], d1..dn then next_token; else empty.
  std::vector<TokenLogprob> logprobs;
  TargetLoad target_load;        // the verifying service's load (remote targets)
};

// INVALID_ARGUMENT naming what is wrong: empty prompt, ids outside the
// vocabulary, prompt + max_new_tokens past the context, bad sampling rules.
absl::Status ValidateSessionSpec(const SessionSpec& spec, const ModelConfig& config);

}  // namespace specserve
