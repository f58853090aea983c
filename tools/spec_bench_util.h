// Pieces of `specserve spec-bench`: prompt loading, one configuration's run
// over all prompts, and the teacher-forced explanation of its acceptance.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/backend.h"
#include "common/tokenizer.h"
#include "coordinator/local_engines.h"

namespace specserve::cli {

// Token ids of the "prompt" field of each JSON line (at most `limit`).
absl::StatusOr<std::vector<std::vector<TokenId>>> LoadPrompts(const std::string& path, const Tokenizer& tok,
                                                              int limit);

struct BenchRun {
  int64_t decode_tokens = 0;    // tokens after each request's first round
  double decode_seconds = 0;    // time after each request's first round
  int64_t generated = 0, rounds = 0, drafted = 0, accepted = 0;
  std::vector<int64_t> drafted_at, accepted_at;
  std::vector<double> stats_pos_acc;  // accepted_at / drafted_at
  double draft_s = 0, verify_s = 0, total_s = 0;
  int64_t ahead_hits = 0;  // overlap: rounds drafted during the previous verify
  double explained_sum = 0;  // teacher-forced agreement (T=0) or sum_x min(p,q) (T>0)
  int64_t explained_n = 0;   // positions compared
  double explained_full_sum = 0;  // T>0: sum_x min(p,q) with q the draft's full softmax (no top-N)
  int64_t compared = 0;      // draft tokens actually compared (up to each round's first miss)

  double tokens_per_s() const { return decode_seconds > 0 ? decode_tokens / decode_seconds : 0; }
  double acceptance() const { return drafted ? static_cast<double>(accepted) / drafted : 0; }
  double tokens_per_pass() const { return rounds ? static_cast<double>(generated) / rounds : 0; }
  double explained() const { return explained_n ? explained_sum / explained_n : 0; }
  double explained_full() const { return explained_n ? explained_full_sum / explained_n : 0; }
  // Acceptance over compared positions: what the teacher-forced figure predicts.
  double compared_acceptance() const { return compared ? static_cast<double>(accepted) / compared : 0; }
};

// One configuration of a benchmark run.
struct RunSetup {
  v1::Drafter kind = v1::DRAFTER_NONE;
  KPolicy k = KPolicy::Fixed(0);
  float temperature = 0;
  int32_t max_tokens = 256;
  bool explain = false;           // add the teacher-forced figures
  bool overlap = false;           // the draft drafts ahead during the verify
  int32_t lookup_min_ngram = 0;   // DraftRule::lookup_min_ngram (model drafter, greedy)
};

// Runs every prompt for max_tokens new tokens (EOS does not stop a benchmark
// run) with seed = prompt index.
absl::Status RunConfig(Backend& target, Backend* draft, const RunSetup& setup,
                       const std::vector<std::vector<TokenId>>& prompts, BenchRun* out);

}  // namespace specserve::cli
