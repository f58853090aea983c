#include "spec/target_session.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace specserve {

// After the prefill (the first round): the prompt's whole blocks become
// attachable by later sessions (KvPool::PublishPrefix).
void TargetSession::PublishPromptPrefix() {
  if (prefix_published_) return;
  prefix_published_ = true;
  pool_.PublishPrefix(kv_, absl::MakeConstSpan(spec_.prompt.data(), spec_.prompt.size() - 1));
}

static_assert(kMaxRoundK <= kMaxVerifyK, "the verify rule must take every round's block");

absl::Status TargetSession::Open(const SessionSpec& spec, ForwardSeq* prefill) {
  if (open_) return absl::FailedPreconditionError("session already open");
  RETURN_IF_ERROR(ValidateSessionSpec(spec, config_));
  spec_ = spec;
  rules_state_ = LogitState(&spec_.rules);
  seq_.Reset(spec.prompt);
  open_ = true;
  // prompt[0..n-2] goes into the cache; with prefix caching on, whole blocks
  // another session already computed are attached instead (kv_.length).
  const auto cached = absl::MakeConstSpan(seq_.tokens().data(), seq_.size() - 1);
  prefix_published_ = false;
  const int32_t attached = pool_.AttachPrefix(kv_, cached);
  *prefill = ForwardSeq{&kv_, cached.subspan(attached), 0};
  return absl::OkStatus();
}

absl::Status TargetSession::BeginVerify(int64_t round, const Proposal& p, ForwardSeq* pass) {
  if (!open_) return absl::FailedPreconditionError("session is not open");
  if (in_flight_) return absl::FailedPreconditionError("a verify pass is already in flight");
  PublishPromptPrefix();
  RETURN_IF_ERROR(seq_.ExpectRound(round));
  const int32_t k = static_cast<int32_t>(p.tokens.size());
  if (k > kMaxRoundK || p.dists.size() != p.tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat("proposal of ", k, " tokens and ", p.dists.size(),
                                                   " distributions (K must be <= ", kMaxRoundK, " and match)"));
  }
  // A round commits at most k + 1 tokens; the session's budget bounds them
  // (admission reserved KV for no more).
  const int64_t budget_end = static_cast<int64_t>(spec_.prompt.size()) + spec_.max_new_tokens;
  if (committed_length() + k + 1 > budget_end) {
    return absl::OutOfRangeError(absl::StrCat("round ", round, " with K = ", k, " could commit past the session's ",
                                              spec_.max_new_tokens, " new tokens (", budget_end - committed_length(),
                                              " left)"));
  }
  if (committed_length() + k > config_.n_ctx) {
    return absl::InvalidArgumentError(absl::StrCat("K = ", k, " runs past the context of ", config_.n_ctx));
  }
  for (int32_t i = 0; i < k; ++i) {
    if (p.tokens[i] < 0 || p.tokens[i] >= config_.vocab) {
      return absl::InvalidArgumentError(absl::StrCat("draft token id ", p.tokens[i], " is outside the vocabulary"));
    }
    RETURN_IF_ERROR(ValidateSparseDist(p.dists[i], config_.vocab));
  }
  proposal_ = p;
  verify_ = VerifyInput{};
  verify_.vocab = config_.vocab;
  verify_.k = k;
  verify_.draft_tokens = proposal_.tokens.data();
  verify_.draft_dists = proposal_.dists.data();
  verify_.params = spec_.target;
  verify_.first_position = static_cast<uint64_t>(seq_.size());
  feed_.assign(1, seq_.pending());
  feed_.insert(feed_.end(), p.tokens.begin(), p.tokens.end());
  *pass = ForwardSeq{&kv_, feed_, k + 1};
  in_flight_ = true;
  return absl::OkStatus();
}

absl::StatusOr<RoundResult> TargetSession::FinishVerify(const float* logits) {
  if (!in_flight_) return absl::FailedPreconditionError("no verify pass in flight");
  VerifyInput in = verify_;
  in.target_logits = logits;
  if (spec_.rules.active()) {
    const int64_t n = static_cast<int64_t>(in.k + 1) * config_.vocab;
    rows_.assign(logits, logits + n);
    ApplyToBlock(rules_state_, proposal_.tokens.data(), in.k, config_.vocab, rows_.data());
    in.target_logits = rows_.data();
  }
  absl::StatusOr<VerifyResult> v = Verify(in);
  if (!v.ok()) {
    in_flight_ = false;
    return v.status();
  }
  std::vector<TokenLogprob> logprobs;
  if (spec_.logprobs) {
    // Rows 0..n score the committed d1..dn, x (the rows verification used).
    std::vector<TokenId> committed(proposal_.tokens.begin(), proposal_.tokens.begin() + v->accepted);
    committed.push_back(v->next_token);
    absl::StatusOr<std::vector<TokenLogprob>> l =
        RoundLogprobs(logits, in.k + 1, config_.vocab, committed, spec_.top_logprobs);
    if (!l.ok()) {
      in_flight_ = false;
      return l.status();
    }
    logprobs = std::move(*l);
  }
  ASSIGN_OR_RETURN(RoundResult r, FinishVerify(*v));
  r.logprobs = std::move(logprobs);
  return r;
}

absl::StatusOr<RoundResult> TargetSession::FinishVerify(const VerifyResult& v) {
  if (!in_flight_) return absl::FailedPreconditionError("no verify pass in flight");
  in_flight_ = false;
  const int32_t k = static_cast<int32_t>(proposal_.tokens.size());
  if (v.accepted < 0 || v.accepted > k || v.next_token < 0 || v.next_token >= config_.vocab) {
    return absl::InvalidArgumentError(absl::StrCat("verify result (", v.accepted, ", ", v.next_token,
                                                   ") outside [0, ", k, "] x the vocabulary"));
  }
  // Keep pending, d1..dn in the cache; x becomes the new pending token.
  pool_.Truncate(kv_, seq_.size() + v.accepted);
  const int64_t round = seq_.Commit(absl::MakeConstSpan(proposal_.tokens).first(v.accepted), v.next_token);
  if (spec_.rules.active()) {
    for (int32_t i = 0; i <= v.accepted; ++i) {
      const TokenId t = i < v.accepted ? proposal_.tokens[i] : v.next_token;
      if (absl::Status s = rules_state_.Advance(t); !s.ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat("the constraint allows no token at output position ", rules_state_.generated(), ": ",
                         s.message()));
      }
    }
  }
  return RoundResult{round, v.accepted, v.next_token};
}

void TargetSession::Close() {
  pool_.Release(kv_);
  open_ = false;
  in_flight_ = false;
}

}  // namespace specserve
