// Prompt lookup as a pre-drafter (Saxena 2023, "prompt lookup decoding"):
// each round it first proposes what followed the most recent earlier
// occurrence of the longest suffix of the committed sequence (max_ngram down
// to min_ngram tokens, spec/prompt_lookup.h); only when nothing matches does
// the drafter behind it propose. Any Drafter may sit behind it, or none:
// alone it is the "ngram" drafter, no model and no service, and the fallback
// when the draft service is gone. Its q is one-hot, so verification stays
// exact, under any constraint too (the target transforms its rows,
// spec/logit_rules.h).
//
// The drafter behind keeps its own round numbering and committed sequence:
// a round it proposed reaches it as that round's verdict; a round the lookup
// answered (or that drafted nothing) reaches it as one commit per committed
// token with nothing proposed (Drafter::Commit with accepted = 0), so it
// resumes from the same committed sequence.
#pragma once

#include <memory>
#include <vector>

#include "absl/strings/string_view.h"
#include "coordinator/roles.h"
#include "spec/committed_sequence.h"
#include "spec/logit_rules.h"
#include "spec/prompt_lookup.h"

namespace specserve {

// The registry name of prompt lookup alone (coordinator/drafter_registry.h).
inline constexpr absl::string_view kNgramDrafterName = "ngram";

class NgramDrafter final : public Drafter {
 public:
  explicit NgramDrafter(int32_t max_ngram = 4, int32_t min_ngram = 1) : NgramDrafter(nullptr, max_ngram, min_ngram) {}
  // `behind` (may be null) proposes the rounds the lookup finds nothing for.
  NgramDrafter(std::unique_ptr<Drafter> behind, int32_t max_ngram, int32_t min_ngram)
      : max_ngram_(max_ngram), min_ngram_(min_ngram), behind_(std::move(behind)) {}
  absl::Status Open(const SessionSpec& spec) override;
  absl::Status AwaitOpen() override { return behind_ ? behind_->AwaitOpen() : absl::OkStatus(); }
  absl::Status Commit(const Verdict& v) override;
  // Proposes up to k tokens; fewer (even none) when the context has no match
  // and nothing sits behind. In front of a drafter a looked-up block is
  // flagged Proposal::looked_up (its round is labelled "lookup").
  absl::StatusOr<Proposal> Propose(int64_t round, int32_t k) override;
  void Close() override;
  // Alone "ngram"; in front of a drafter, that drafter's name.
  absl::string_view name() const override { return behind_ ? behind_->name() : kNgramDrafterName; }
  bool remote() const override { return behind_ && behind_->remote(); }
  // Drafting ahead follows a block the drafter behind proposed, never a looked-up one.
  void PrepareAhead(int32_t k) override {
    if (behind_ && behind_proposed_) behind_->PrepareAhead(k);
  }

 private:
  int32_t max_ngram_, min_ngram_;
  std::unique_ptr<Drafter> behind_;
  int64_t behind_round_ = 0;       // the round the drafter behind expects next
  bool behind_proposed_ = false;   // this round's proposal is the drafter behind's
  CommittedSequence seq_;
  std::vector<TokenId> proposed_;  // this round's proposal (empty when none)
  // With a grammar filter (LogitRules::filter): its state at the committed
  // sequence; a looked-up block is cut before the first token it refuses
  // (the target would reject it). Exactness does not depend on it.
  std::shared_ptr<const TokenFilter> filter_prototype_;
  std::unique_ptr<TokenFilter> filter_;
};

}  // namespace specserve
