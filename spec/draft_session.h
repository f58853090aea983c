// One request's state on the draft model: its KV cache, the committed
// sequence and the proposal in progress. Proposing K tokens takes K
// dependent passes (feed, sample, feed, ...), exposed one step at a time so
// the service's scheduler can batch the step of many sessions together.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/backend.h"
#include "spec/committed_sequence.h"
#include "spec/forward_sample.h"
#include "spec/round.h"

namespace specserve {

class DraftSession {
 public:
  DraftSession(KvPool& pool, const ModelConfig& config) : pool_(pool), config_(config) {}
  ~DraftSession() { Close(); }
  DraftSession(const DraftSession&) = delete;
  DraftSession& operator=(const DraftSession&) = delete;

  // *prefill caches prompt[0..n-2] (skip it when it has no tokens).
  absl::Status Open(const SessionSpec& spec, ForwardSeq* prefill);

  // Applies a round's verdict (docs/round_protocol.md "Commit"): `v.round`
  // must be the round this session expects, accepting a prefix of that
  // round's proposal (none when nothing was proposed for it). The cache is
  // rolled back to the longest prefix that is still committed; whatever
  // committed tokens it lacks are fed by the next proposal's first step.
  // FAILED_PRECONDITION for a stale or repeated round, INVALID_ARGUMENT for
  // a verdict that does not fit; either way nothing changes.
  absl::Status Commit(const Verdict& v);
  // Starts proposing k tokens for `round` (the round the next Commit
  // carries), from the committed sequence. One proposal per round.
  absl::Status BeginPropose(int64_t round, int32_t k);
  // The next pass to run, or false when the proposal is complete.
  bool NextStep(ForwardSeq* pass);
  // The rule that pass's row is sampled with (its position included): what
  // the backend's sampling step takes (Backend::ForwardSample). Valid from
  // NextStep returning true until the step finishes.
  const DraftSampleInput& step_rule() const { return step_rule_; }
  // step_rule() for the backend's sampling step, or nullptr when this
  // session samples on the host (SessionSpec::host_sampling: the constraint
  // transforms the row first, spec/logit_rules.h); the pass then returns its
  // row for FinishStep.
  const DraftSampleInput* sample_rule() const { return spec_.host_sampling() ? nullptr : &step_rule_; }
  // The step's token and q, sampled from the pass's row with step_rule().
  void FinishSampledStep(DraftSample sample);
  // logits: [vocab], the last row of that pass. Samples the next draft token
  // on the host (SampleDraftStep; a constrained session first transforms the
  // row with the constraint after the committed tokens and the drafts before
  // this one, so q never proposes what the target forbids) and finishes the
  // step with it.
  void FinishStep(const float* logits);
  // The finished proposal (a copy: the next verdict refers to it).
  Proposal TakeProposal();

  // Overlap (docs/round_protocol.md "Overlap"): while the target verifies the proposal just
  // taken, draft the next round on the guess that all of it is accepted and
  // the bonus token is the draft's own next sample. Runs as steps like a
  // proposal. If the round's Commit matches the guess, the next round's
  // BeginPropose (with k <= this k) takes the block without a pass;
  // otherwise it is dropped and the cache rolls back as usual. Output is unchanged either way: the block
  // is what the draft would have sampled from the same committed prefix.
  void BeginAhead(int32_t k);
  void AbortPropose();  // a step's pass failed: the session closes

  void Close();

  bool open() const { return open_; }
  int64_t next_round() const { return seq_.next_round(); }
  const KvSeq& kv() const { return kv_; }
  const std::vector<TokenId>& committed() const { return seq_.tokens(); }

 private:
  KvPool& pool_;
  const ModelConfig& config_;
  bool open_ = false;
  SessionSpec spec_;
  CommittedSequence seq_;        // next_round(): the round the next Commit and BeginPropose carry
  void PublishPromptPrefix();
  bool prefix_published_ = false;  // the prompt's blocks are in the prefix cache
  KvSeq kv_;                     // a prefix of the committed sequence + proposal
  Proposal proposal_;            // this round's proposal (kept to apply its verdict)
  bool proposed_ = false;        // BeginPropose ran in this round
  int32_t steps_left_ = 0;
  std::vector<TokenId> feed_;    // tokens of the next step's pass
  DraftSampleInput step_rule_;   // and the rule its row is sampled with
  // The block drafted ahead: guess (the assumed bonus) then its proposal.
  bool ahead_ = false;           // steps are drafting ahead
  bool ahead_ready_ = false;     // the block is complete
  bool ahead_held_ = false;      // ...and the last Commit matched its guess
  TokenId ahead_guess_ = -1;
  Proposal ahead_proposal_;
  int32_t ahead_k_ = 0;
  // The constraint (over spec_.rules) after committed()[0, rules_synced_),
  // and a fork of it after rules_fork_tokens_ drafted past that point.
  void ConstrainRow(float* row);
  LogitState rules_committed_;
  size_t rules_synced_ = 0;
  LogitState rules_fork_;
  std::vector<TokenId> rules_fork_tokens_;
  std::vector<float> row_;       // [vocab] the transformed row
};

}  // namespace specserve
