// One request's speculative decoding loop (docs/round_protocol.md "The round"), the same
// code whether the drafter and verifier are in this process or behind gRPC.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "coordinator/k_policy.h"
#include "coordinator/roles.h"

namespace specserve {

// What one round did, timed once by the loop. The request's statistics
// (LoopStats), the coordinator's metrics and adaptive K are all built from
// these records.
struct RoundRecord {
  // The drafter's registry name (Drafter::name), "lookup" for a looked-up
  // block in front of a drafter, "none" in a round without a drafter.
  std::string drafter = "none";
  int32_t k = 0;                 // asked of the drafter
  int32_t drafted = 0;           // proposed and verified
  int32_t accepted = 0;
  bool drafted_ahead = false;    // the block was drafted during the previous verify
  // What the K policy chose and why, in rounds with a drafter (k may be
  // less: the budget's end, a draft session still opening).
  std::optional<KPolicy::Choice> choice;
  // Wall seconds of the Propose and Verify calls as the loop saw them.
  double draft_wall = 0, verify_wall = 0;
  // The round in phases: "draft" and "verify" are the time the engines
  // report for their call (queueing and compute; the whole call for a drafter
  // in this process), "network" the rest of the two calls' wall time
  // (transport, serialisation, the coordinator's own overhead).
  double draft_seconds = 0, verify_seconds = 0, network_seconds = 0;
};

struct LoopOptions {
  KPolicy k = KPolicy::Fixed(4);
  std::vector<TokenId> stop_tokens;  // end of sequence: not emitted, finish "stop"
  // Receives each round's committed tokens (already cut at a stop token or
  // the budget). Returning false ends the request (stop string, client gone).
  std::function<bool(absl::Span<const TokenId>)> on_tokens;
  // With SessionSpec::logprobs: the logprobs of exactly the tokens on_tokens
  // is about to receive (same cut), called just before it.
  std::function<void(absl::Span<const TokenLogprob>)> on_logprobs;
  // Observes each verified round, before its tokens are cut.
  std::function<void(const RoundRecord&)> on_round;
  // Receives the target's load report with each verdict that carries one,
  // and the verify call's seconds outside the target.
  std::function<void(const TargetLoad&, double network_seconds)> on_target_load;
  // Receives the policy after each round that drafted (what it has learned
  // of acceptance and the draft's cost), to seed later requests' (KPolicy::Seed);
  // never after a fallback, whose rounds blend another drafter's into it.
  std::function<void(const KPolicy&)> on_policy;
  // Called when the drafter fails to open (`at_open`) or to propose, with
  // its error; returns a replacement (the n-gram drafter) or nullptr for
  // plain target decoding. Output stays exact either way.
  std::function<std::unique_ptr<Drafter>(const absl::Status& why, bool at_open)> make_fallback;
  // Draft the next round on a second thread while the target verifies
  // (docs/round_protocol.md "Overlap"). Needs a drafter and target that may run concurrently
  // (separate backends and cores); output is identical either way.
  bool overlap = false;
};

struct LoopStats {
  int64_t generated = 0;     // tokens emitted
  int64_t rounds = 0;        // target passes
  int64_t drafted = 0;       // tokens proposed and verified
  int64_t accepted = 0;
  std::vector<int64_t> drafted_at, accepted_at;  // per draft position (0 = d1)
  std::vector<int64_t> accepted_hist;            // rounds by accepted length
  // Sums of the rounds' phases (RoundRecord).
  double draft_seconds = 0, verify_seconds = 0, network_seconds = 0;
  double first_token_seconds = 0;
  double total_seconds = 0;
  int32_t fallbacks = 0;
  int64_t ahead_hits = 0;     // rounds whose block was drafted during the previous verify
  int32_t last_k = 0;
  std::string finish_reason;  // "stop" (EOS / stop string / caller), "length"

  void Add(const RoundRecord& r);
  double acceptance_rate() const { return drafted ? static_cast<double>(accepted) / drafted : 0; }
  double tokens_per_pass() const { return rounds ? static_cast<double>(generated) / rounds : 0; }
};

// Runs to max_new_tokens, a stop token or on_tokens returning false. The
// verifier is opened and closed here; so is the drafter (nullptr: plain
// decoding). Target errors end the request with that error; drafter errors
// trigger the fallback.
absl::StatusOr<LoopStats> RunSpeculative(const SessionSpec& spec, Drafter* drafter, Verifier& verifier,
                                         LoopOptions& opts);

}  // namespace specserve
