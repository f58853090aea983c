// A Generate request checked and turned into what the round loop runs: the
// session (prompt ids, sampling rules, budget), K, the drafter and the stop
// strings. Every INVALID_ARGUMENT a client can get for its request comes from
// here, before any service is called.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model_config.h"
#include "common/tokenizer.h"
#include "constrain/grammar_compiler.h"
#include "coordinator/k_policy.h"
#include "spec/round.h"
#include "specserve/v1/generation.pb.h"

namespace specserve {

struct CoordinatorOptions {
  int default_k = -1;         // -1 (the default): adaptive; else 0..16
  int default_max_tokens = 128;
  int max_stop_strings = 16;
  int max_stop_bytes = 256;   // per stop string
  int max_stop_token_ids = 16;
  // A draft call slower than this counts as a draft failure (0: no limit).
  std::chrono::milliseconds draft_timeout{2000};
  // ... plus this per prompt token for the first draft call, which waits for
  // the draft's prefill of the prompt.
  double draft_open_ms_per_token = 20;
  // Draft service: draft the next block while the target verifies (docs/round_protocol.md).
  bool overlap = true;
  // DraftRule::lookup_min_ngram of every session (greedy drafts only; 0: off).
  int draft_lookup = 2;
  // A prompt longer than this is refused by its size, before tokenizing.
  int64_t max_prompt_bytes = 1 << 20;
  // Every request decodes plainly while the target has this many sessions
  // open or more (KPolicy::DisableAtSessions; 0: never).
  int speculation_max_sessions = 0;
  // A verify call slower than this fails the request with UNAVAILABLE (0: no limit).
  std::chrono::milliseconds verify_timeout{60000};
};

struct Plan {
  SessionSpec spec;
  KPolicy k = KPolicy::Fixed(0);
  // Resolved: MODEL (the draft service), NGRAM or NONE; never UNSPECIFIED.
  v1::Drafter drafter = v1::DRAFTER_NONE;
  std::vector<std::string> stops;
  // The request's stop_token_ids (the end-of-sequence token is added by the runner).
  std::vector<TokenId> stop_token_ids;
};

// `draft_configured`: the coordinator has a draft service (an unspecified
// drafter means the model then, the n-gram drafter otherwise). `grammar`
// compiles a json_schema (null: such requests are INVALID_ARGUMENT).
absl::StatusOr<Plan> PlanRequest(const v1::GenerateRequest& req, const CoordinatorOptions& opts,
                                 const Tokenizer& tokenizer, const ModelConfig& config, bool draft_configured,
                                 const constrain::GrammarCompiler* grammar = nullptr);

}  // namespace specserve
