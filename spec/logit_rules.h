// A request's constraints on what is sampled, as a transform of the target's
// (and the draft's) logits row at a position, given the tokens generated so
// far (docs/exact_verification.md "Constraints"). Applied before the
// sampling rule (spec/sampling.h), in this order, as vLLM and OpenAI do:
//   1. the grammar filter (TokenFilter::Mask): forbidden tokens get -inf;
//   2. logit_bias: logits[t] += bias[t];
//   3. penalties: logits[t] -= frequency_penalty * count(t)
//                              + presence_penalty * (count(t) > 0),
//      count(t) = occurrences of t among the tokens generated so far in this
//      request (output tokens only, the prompt does not count: vLLM's rule);
//   4. min_tokens: while fewer than min_tokens tokens were generated, the
//      end-of-sequence ids and the request's stop token ids get -inf;
//   5. ignore_eos: the end-of-sequence ids get -inf always.
// Then temperature, min_p, top-k and top-p (SamplingParams).
//
// LogitRules is the request's fixed part; LogitState follows one sequence of
// generated tokens (counts kept incrementally, the filter's state) and is
// copied to fork it: a verify pass forks the committed state and advances
// the fork through d1..dK, row i transformed with the state after d1..di; the
// verdict advances the committed state by d1..dn, x and drops the fork.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "spec/sampling.h"
#include "spec/token_filter.h"

namespace specserve {

inline constexpr float kMaxLogitBias = 100.0f;
inline constexpr float kMaxPenalty = 2.0f;

struct LogitRules {
  std::vector<std::pair<TokenId, float>> logit_bias;  // ids unique, in [0, vocab); bias in [-100, 100]
  float presence_penalty = 0.0f;                      // [-2, 2]
  float frequency_penalty = 0.0f;                     // [-2, 2]
  int32_t min_tokens = 0;                             // >= 0
  bool ignore_eos = false;
  // The model's end-of-sequence ids (the coordinator sends its tokenizer's)
  // and the request's stop token ids: what min_tokens holds back. ignore_eos
  // holds back eos_ids only.
  std::vector<TokenId> eos_ids;
  std::vector<TokenId> stop_ids;
  // A grammar's source (e.g. a JSON Schema for constrain/): what travels on
  // the wire. Each side compiles it into `filter` for its own vocabulary
  // (the coordinator when planning, each service right after SpecFromProto);
  // a spec with a grammar and no filter is refused, never run unconstrained.
  std::string grammar;
  // The compiled grammar at the start of the output. Each followed sequence
  // holds its own Clone; the prototype is never advanced.
  std::shared_ptr<const TokenFilter> filter;

  // Whether Apply can change any row. Without active rules a session keeps
  // its device paths.
  bool active() const {
    return !logit_bias.empty() || presence_penalty != 0.0f || frequency_penalty != 0.0f || min_tokens > 0 ||
           ignore_eos || filter != nullptr || !grammar.empty();
  }
};

// INVALID_ARGUMENT naming the field (logit_bias, presence_penalty,
// frequency_penalty, min_tokens, eos_ids, stop_ids, grammar) when a value is
// out of range, an id is outside [0, vocab), or a grammar was not compiled.
absl::Status ValidateLogitRules(const LogitRules& rules, int32_t vocab);

class LogitState {
 public:
  LogitState() = default;  // no rules: Apply changes nothing
  // At zero generated tokens. `rules` must outlive the state and its copies.
  explicit LogitState(const LogitRules* rules);
  LogitState(const LogitState& other) { *this = other; }
  LogitState& operator=(const LogitState& other);
  LogitState(LogitState&&) = default;
  LogitState& operator=(LogitState&&) = default;

  // Transforms one row [vocab] in place (steps 1-5 above). O(vocab) only
  // for the filter's mask; O(|bias| + distinct generated tokens) otherwise.
  void Apply(float* logits, int32_t vocab);
  // Moves past a generated token. INVALID_ARGUMENT (state unchanged) when the
  // filter does not allow it.
  absl::Status Advance(TokenId token);

  int32_t generated() const { return generated_; }
  int32_t count(TokenId token) const;

 private:
  const LogitRules* rules_ = nullptr;
  int32_t generated_ = 0;
  absl::flat_hash_map<TokenId, int32_t> counts_;  // only with a penalty
  std::unique_ptr<TokenFilter> filter_;
};

// Transforms a verify block's rows [k + 1, vocab] in place: row i with the
// state `committed` advanced through drafts[0..i). A draft the filter
// forbids has logit -inf in its own row, so verification rejects it there;
// the rows after it are left as they are (never read). `committed` is not
// changed.
void ApplyToBlock(const LogitState& committed, const TokenId* drafts, int32_t k, int32_t vocab, float* rows);

}  // namespace specserve
