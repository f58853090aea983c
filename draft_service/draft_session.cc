#include "draft_service/draft_session.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/rng.h"
#include "common/status_macros.h"

namespace specserve {

absl::Status DraftSession::Open(const SessionSpec& spec, ForwardSeq* prefill) {
  if (open_) return absl::FailedPreconditionError("session already open");
  RETURN_IF_ERROR(ValidateSessionSpec(spec, config_));
  spec_ = spec;
  tokens_ = spec.prompt;
  round_ = 0;
  proposal_ = {};
  ahead_ = ahead_ready_ = false;
  open_ = true;
  *prefill = ForwardSeq{&kv_, absl::MakeConstSpan(tokens_.data(), tokens_.size() - 1), 0};
  return absl::OkStatus();
}

absl::Status DraftSession::BeginPropose(int64_t round, const std::optional<RoundResult>& last, int32_t k) {
  if (!open_) return absl::FailedPreconditionError("session is not open");
  if (round != round_) {
    return absl::FailedPreconditionError(absl::StrCat("round ", round, " refused: expected round ", round_));
  }
  if (round > 0 && !last.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("round ", round, " needs the verdict of round ", round - 1));
  }
  if (k < 0 || k > 64) return absl::InvalidArgumentError(absl::StrCat("K = ", k, " not in [0, 64]"));
  if (last.has_value()) {
    const int32_t proposed = static_cast<int32_t>(proposal_.tokens.size());
    if (last->round != round - 1 || last->accepted < 0 || last->accepted > proposed ||
        last->next_token < 0 || last->next_token >= config_.vocab) {
      return absl::InvalidArgumentError(absl::StrCat("verdict (round ", last->round, ", accepted ", last->accepted,
                                                     ", next ", last->next_token, ") does not fit round ", round - 1,
                                                     " with ", proposed, " proposed tokens"));
    }
    const int32_t base = static_cast<int32_t>(tokens_.size());
    const bool guessed = ahead_ready_ && last->accepted == proposed && last->next_token == ahead_guess_ &&
                         k <= ahead_k_ && k > 0;
    ahead_ready_ = false;
    ahead_ = false;
    if (guessed) {
      // The block drafted ahead is exactly what this round would draft.
      tokens_.insert(tokens_.end(), proposal_.tokens.begin(), proposal_.tokens.end());
      tokens_.push_back(last->next_token);
      proposal_ = std::move(ahead_proposal_);
      proposal_.tokens.resize(k);
      proposal_.dists.resize(k);
      proposal_.drafted_ahead = true;
      steps_left_ = 0;
      ++round_;
      return absl::OkStatus();
    }
    tokens_.insert(tokens_.end(), proposal_.tokens.begin(), proposal_.tokens.begin() + last->accepted);
    tokens_.push_back(last->next_token);
    // The cache may keep pending, d1..dn: positions [0, base + n).
    pool_.Truncate(kv_, std::min(kv_.length, base + last->accepted));
  }
  if (static_cast<int64_t>(tokens_.size()) + k > config_.n_ctx) {
    k = std::max(0, config_.n_ctx - static_cast<int32_t>(tokens_.size()));
  }
  proposal_ = {};
  ++round_;
  if (spec_.draft.lookup_min_ngram > 0 && spec_.draft.temperature == 0 && k > 0) {
    // The longest match first (up to 4 tokens past the minimum), so a long
    // repeat wins over a short one.
    const int32_t min_n = spec_.draft.lookup_min_ngram;
    std::vector<TokenId> cont = PromptLookup(tokens_, k, min_n + 4, min_n);
    if (!cont.empty()) {
      for (TokenId t : cont) proposal_.dists.push_back(SparseDist{{t}, {1.0f}});
      proposal_.tokens = std::move(cont);
      proposal_.looked_up = true;
      steps_left_ = 0;  // the cache catches up on these tokens in a later round's first pass
      return absl::OkStatus();
    }
  }
  steps_left_ = k;
  feed_.assign(tokens_.begin() + kv_.length, tokens_.end());
  return absl::OkStatus();
}

bool DraftSession::NextStep(ForwardSeq* pass) {
  if (steps_left_ == 0) return false;
  *pass = ForwardSeq{&kv_, feed_, 1};
  return true;
}

void DraftSession::BeginAhead(int32_t k) {
  ahead_ = ahead_ready_ = false;
  steps_left_ = 0;
  const int32_t n = static_cast<int32_t>(proposal_.tokens.size());
  // A looked-up proposal was never fed to the cache: nothing to draft on from.
  if (!open_ || n == 0 || k <= 0 || proposal_.looked_up ||
      static_cast<int64_t>(tokens_.size()) + n + 1 + k > config_.n_ctx) {
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
  if (ahead_) {
    // Positions continue past the proposal: the guess sits right after dK.
    const uint64_t position = tokens_.size() + proposal_.tokens.size() + (ahead_guess_ < 0 ? 0 : 1) +
                              ahead_proposal_.tokens.size();
    SparseDist q = DraftDistribution(logits, config_.vocab, spec_.draft.temperature, spec_.draft.top_n,
                                     spec_.draft.top_p);
    const TokenId d = SampleSparse(q, UniformFloat(spec_.target.seed, position, RngPurpose::kDraftSample));
    if (ahead_guess_ < 0) {
      ahead_guess_ = d;
    } else {
      ahead_proposal_.tokens.push_back(d);
      ahead_proposal_.dists.push_back(std::move(q));
    }
    feed_.assign(1, d);
    if (--steps_left_ == 0) ahead_ready_ = true;
    return;
  }
  // The token sampled now sits at absolute position tokens_.size() + (drafted so far).
  const uint64_t position = tokens_.size() + proposal_.tokens.size();
  SparseDist q = DraftDistribution(logits, config_.vocab, spec_.draft.temperature, spec_.draft.top_n,
                                   spec_.draft.top_p);
  const float u = UniformFloat(spec_.target.seed, position, RngPurpose::kDraftSample);
  const TokenId d = SampleSparse(q, u);
  proposal_.tokens.push_back(d);
  proposal_.dists.push_back(std::move(q));
  feed_.assign(1, d);
  --steps_left_;
}

Proposal DraftSession::TakeProposal() {
  Proposal p = proposal_;  // keep a copy: the next verdict refers to it
  return p;
}

void DraftSession::AbortPropose() {
  // The verdict was already applied and the cache may be half-written: this
  // session cannot continue, and the coordinator falls back to another drafter.
  Close();
}

void DraftSession::Close() {
  pool_.Release(kv_);
  open_ = false;
  steps_left_ = 0;
  ahead_ = ahead_ready_ = false;
}

}  // namespace specserve
