#include "spec/draft_session.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "spec/prompt_lookup.h"
#include "spec/rng.h"

namespace specserve {

// After the prefill (the first round): the prompt's whole blocks become
// attachable by later sessions (KvPool::PublishPrefix).
void DraftSession::PublishPromptPrefix() {
  if (prefix_published_) return;
  prefix_published_ = true;
  pool_.PublishPrefix(kv_, absl::MakeConstSpan(spec_.prompt.data(), spec_.prompt.size() - 1));
}

absl::Status DraftSession::Open(const SessionSpec& spec, ForwardSeq* prefill) {
  if (open_) return absl::FailedPreconditionError("session already open");
  RETURN_IF_ERROR(ValidateSessionSpec(spec, config_));
  spec_ = spec;
  seq_.Reset(spec.prompt);
  rules_committed_ = LogitState(&spec_.rules);
  rules_synced_ = spec_.prompt.size();
  rules_fork_ = rules_committed_;
  rules_fork_tokens_.clear();
  proposal_ = {};
  proposed_ = false;
  ahead_ = ahead_ready_ = ahead_held_ = false;
  open_ = true;
  // prompt[0..n-2] goes into the cache; with prefix caching on, whole blocks
  // another session already computed are attached instead (kv_.length).
  const auto cached = absl::MakeConstSpan(seq_.tokens().data(), seq_.size() - 1);
  prefix_published_ = false;
  const int32_t attached = pool_.AttachPrefix(kv_, cached);
  *prefill = ForwardSeq{&kv_, cached.subspan(attached), 0};
  return absl::OkStatus();
}

absl::Status DraftSession::Commit(const Verdict& v) {
  if (!open_) return absl::FailedPreconditionError("session is not open");
  PublishPromptPrefix();
  const int32_t proposed = proposed_ ? static_cast<int32_t>(proposal_.tokens.size()) : 0;
  RETURN_IF_ERROR(seq_.CheckCommit(v, proposed, config_.vocab));
  const int32_t base = seq_.size();
  ahead_held_ = ahead_ready_ && proposed > 0 && v.accepted == proposed && v.next_token == ahead_guess_;
  ahead_ready_ = false;
  ahead_ = false;
  steps_left_ = 0;
  seq_.Commit(absl::MakeConstSpan(proposal_.tokens).first(v.accepted), v.next_token);
  proposal_ = {};
  proposed_ = false;
  // The cache may keep pending, d1..dn: positions [0, base + n). A held
  // guess keeps dK and the block drafted after it too.
  if (!ahead_held_) pool_.Truncate(kv_, std::min(kv_.length, base + v.accepted));
  return absl::OkStatus();
}

absl::Status DraftSession::BeginPropose(int64_t round, int32_t k) {
  if (!open_) return absl::FailedPreconditionError("session is not open");
  PublishPromptPrefix();
  RETURN_IF_ERROR(seq_.ExpectRound(round));
  if (proposed_) return absl::FailedPreconditionError(absl::StrCat("round ", round, " was already proposed"));
  if (k < 0 || k > kMaxRoundK) return absl::InvalidArgumentError(absl::StrCat("K = ", k, " not in [0, ", kMaxRoundK, "]"));
  proposed_ = true;
  const bool held = std::exchange(ahead_held_, false);
  if (held && k > 0 && k <= ahead_k_) {
    // The block drafted ahead is exactly what this round would draft.
    proposal_ = std::move(ahead_proposal_);
    proposal_.tokens.resize(k);
    proposal_.dists.resize(k);
    proposal_.drafted_ahead = true;
    steps_left_ = 0;
    return absl::OkStatus();
  }
  // A held guess whose block is not used: the cache keeps only what is committed.
  if (held) pool_.Truncate(kv_, std::min(kv_.length, seq_.size() - 1));
  // Never draft past the context or what the session's budget can still commit.
  const int64_t budget_end = static_cast<int64_t>(spec_.prompt.size()) + spec_.max_new_tokens;
  k = static_cast<int32_t>(std::clamp<int64_t>(
      std::min<int64_t>({k, config_.n_ctx - seq_.size(), budget_end - seq_.size() - 1}), 0, k));
  proposal_ = {};
  if (spec_.draft.lookup_min_ngram > 0 && spec_.draft.temperature == 0 && k > 0) {
    // The longest match first (up to 4 tokens past the minimum), so a long
    // repeat wins over a short one.
    const int32_t min_n = spec_.draft.lookup_min_ngram;
    Proposal looked_up = LookupProposal(seq_.tokens(), k, min_n + 4, min_n);
    if (!looked_up.tokens.empty()) {
      proposal_ = std::move(looked_up);
      proposal_.looked_up = true;
      steps_left_ = 0;  // the cache catches up on these tokens in a later round's first pass
      return absl::OkStatus();
    }
  }
  steps_left_ = k;
  feed_.assign(seq_.tokens().begin() + kv_.length, seq_.tokens().end());
  return absl::OkStatus();
}

bool DraftSession::NextStep(ForwardSeq* pass) {
  if (steps_left_ == 0) return false;
  *pass = ForwardSeq{&kv_, feed_, 1};
  step_rule_.temperature = spec_.draft.temperature;
  step_rule_.top_n = spec_.draft.top_n;
  step_rule_.top_p = spec_.draft.top_p;
  step_rule_.seed = spec_.target.seed;
  // The token sampled now sits at absolute position (committed) + (drafted so
  // far); drafting ahead, past the proposal, with the guess right after dK.
  step_rule_.position = ahead_ ? seq_.size() + proposal_.tokens.size() + (ahead_guess_ < 0 ? 0 : 1) +
                                     ahead_proposal_.tokens.size()
                               : seq_.size() + proposal_.tokens.size();
  return true;
}

void DraftSession::BeginAhead(int32_t k) {
  ahead_ = ahead_ready_ = ahead_held_ = false;
  steps_left_ = 0;
  const int32_t n = static_cast<int32_t>(proposal_.tokens.size());
  // A looked-up proposal was never fed to the cache: nothing to draft on from.
  if (!open_ || n == 0 || k <= 0 || proposal_.looked_up ||
      static_cast<int64_t>(seq_.size()) + n + 1 + k > config_.n_ctx ||
      static_cast<int64_t>(seq_.size()) + n + 1 + k > static_cast<int64_t>(spec_.prompt.size()) + spec_.max_new_tokens) {
    return;  // nothing to guess from, or no room: the next round drafts normally
  }
  ahead_ = true;
  ahead_k_ = k;
  ahead_guess_ = -1;
  ahead_proposal_ = {};
  feed_.assign(1, proposal_.tokens.back());  // dK, never fed by the proposal itself
  steps_left_ = k + 1;                       // the guess, then k tokens
}

void DraftSession::FinishStep(const float* logits) {
  if (!spec_.host_sampling()) {
    FinishSampledStep(SampleDraftStep(logits, config_.vocab, step_rule_));
    return;
  }
  row_.assign(logits, logits + config_.vocab);
  ConstrainRow(row_.data());
  DraftSample sample;
  sample.dist = DraftDistribution(row_.data(), config_.vocab, step_rule_.temperature, step_rule_.top_n,
                                  step_rule_.top_p, spec_.target.min_p);
  sample.token =
      SampleSparse(sample.dist, UniformFloat(step_rule_.seed, step_rule_.position, RngPurpose::kDraftSample));
  FinishSampledStep(std::move(sample));
}

void DraftSession::ConstrainRow(float* row) {
  if (!spec_.rules.active()) return;
  // The tokens drafted before this step: the proposal, then (drafting ahead)
  // the guessed bonus and the block after it.
  std::vector<TokenId> drafted = proposal_.tokens;
  if (ahead_ && ahead_guess_ >= 0) {
    drafted.push_back(ahead_guess_);
    drafted.insert(drafted.end(), ahead_proposal_.tokens.begin(), ahead_proposal_.tokens.end());
  }
  const std::vector<TokenId>& committed = seq_.tokens();
  bool fork_valid = rules_synced_ == committed.size();
  // A refused token (only a drafted one the target would refuse too) leaves
  // the state where it was: the draft's q is a proposal, exactness is the
  // target's.
  for (; rules_synced_ < committed.size(); ++rules_synced_) {
    rules_committed_.Advance(committed[rules_synced_]).IgnoreError();
  }
  fork_valid = fork_valid && rules_fork_tokens_.size() <= drafted.size() &&
               std::equal(rules_fork_tokens_.begin(), rules_fork_tokens_.end(), drafted.begin());
  if (!fork_valid) {
    rules_fork_ = rules_committed_;
    rules_fork_tokens_.clear();
  }
  for (size_t i = rules_fork_tokens_.size(); i < drafted.size(); ++i) {
    rules_fork_.Advance(drafted[i]).IgnoreError();
    rules_fork_tokens_.push_back(drafted[i]);
  }
  rules_fork_.Apply(row, config_.vocab);
}

void DraftSession::FinishSampledStep(DraftSample sample) {
  const TokenId d = sample.token;
  if (ahead_) {
    if (ahead_guess_ < 0) {
      ahead_guess_ = d;
    } else {
      ahead_proposal_.tokens.push_back(d);
      ahead_proposal_.dists.push_back(std::move(sample.dist));
    }
    feed_.assign(1, d);
    if (--steps_left_ == 0) ahead_ready_ = true;
    return;
  }
  proposal_.tokens.push_back(d);
  proposal_.dists.push_back(std::move(sample.dist));
  feed_.assign(1, d);
  --steps_left_;
}

Proposal DraftSession::TakeProposal() {
  Proposal p = proposal_;  // keep a copy: the round's verdict refers to it
  return p;
}

void DraftSession::AbortPropose() {
  // The cache may be half-written: this session cannot continue, and the coordinator falls back to another drafter.
  Close();
}

void DraftSession::Close() {
  pool_.Release(kv_);
  open_ = false;
  steps_left_ = 0;
  ahead_ = ahead_ready_ = ahead_held_ = false;
}

}  // namespace specserve
