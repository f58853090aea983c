// Prompt-lookup drafting (Saxena 2023, "prompt lookup decoding"): find the
// most recent earlier occurrence of the longest suffix of the context (up to
// max_ngram tokens) and propose the tokens that followed it. No model, no
// service: it runs inside the coordinator and is the fallback when the draft
// service is gone. Its q is one-hot, so verification stays exact, under
// any constraint too (the target transforms its rows, spec/logit_rules.h).
#pragma once

#include <vector>

#include "coordinator/roles.h"
#include "spec/committed_sequence.h"
#include "spec/logit_rules.h"

namespace specserve {

class NgramDrafter final : public Drafter {
 public:
  explicit NgramDrafter(int32_t max_ngram = 4, int32_t min_ngram = 1)
      : max_ngram_(max_ngram), min_ngram_(min_ngram) {}
  absl::Status Open(const SessionSpec& spec) override;
  absl::Status Commit(const Verdict& v) override;
  // Proposes up to k tokens; fewer (even none) when the context has no match.
  absl::StatusOr<Proposal> Propose(int64_t round, int32_t k) override;
  void Close() override { seq_.Reset({}); }
  v1::Drafter kind() const override { return v1::DRAFTER_NGRAM; }

 private:
  int32_t max_ngram_, min_ngram_;
  CommittedSequence seq_;
  std::vector<TokenId> proposed_;  // this round's proposal (empty when none)
  // With a grammar filter (LogitRules::filter): its state at the committed
  // sequence; a proposal is cut before the first token it refuses (the
  // target would reject it). Exactness does not depend on it.
  std::shared_ptr<const TokenFilter> filter_prototype_;
  std::unique_ptr<TokenFilter> filter_;
};

}  // namespace specserve
