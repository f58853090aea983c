#include "coordinator/round_loop.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <utility>

#include "common/status_macros.h"
#include "coordinator/async_worker.h"

namespace specserve {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One request's loop state: the committed sequence as emitted, the drafter in
// use with its own round numbering (a fallback starts again at round 0), and
// the statistics built from the round records.
class Loop {
 public:
  Loop(const SessionSpec& spec, Drafter* drafter, Verifier& verifier, LoopOptions& opts)
      : spec_(spec), verifier_(verifier), opts_(opts), drafter_(drafter), sequence_(spec.prompt) {
    if (opts.overlap) ahead_ = std::make_unique<AsyncWorker>();
  }
  // A request that ends on an error may leave a verdict being heard aside:
  // it finishes before the state it writes goes.
  ~Loop() {
    if (ahead_) ahead_->Wait();
  }

  absl::StatusOr<LoopStats> Run() {
    RETURN_IF_ERROR(verifier_.Open(spec_));
    // A request that starts with plain rounds (K = 0: asked for, or adaptive
    // K under a saturated target) opens its drafter only when K first rises,
    // at the committed sequence: until then the draft service neither
    // prefills the prompt nor hears a verdict.
    unopened_ = drafter_ != nullptr && NextK() == 0;
    if (drafter_ && !unopened_) {
      if (absl::Status s = drafter_->Open(spec_); !s.ok()) FallBack(s, /*at_open=*/true);
    }
    while (st_.generated < spec_.max_new_tokens) {
      RoundRecord rec;
      Proposal proposal = Propose(rec);
      ASSIGN_OR_RETURN(RoundResult verdict, Verify(proposal, rec));
      st_.Add(rec);
      opts_.k.Observe(rec.drafted, rec.accepted, rec.draft_wall, rec.verify_wall, WaitOf(rec),
                      rec.choice ? std::optional(rec.choice->reason) : std::nullopt);
      // After a fallback the policy blends two drafters' rounds: not posted.
      if (opts_.on_policy && rec.drafted > 0 && opts_.k.adaptive() && st_.fallbacks == 0) opts_.on_policy(opts_.k);
      opts_.k.ObserveTarget(verdict.target_load, rec.verify_wall - rec.verify_seconds);
      if (opts_.on_target_load && verdict.target_load.known) {
        opts_.on_target_load(verdict.target_load, rec.verify_wall - rec.verify_seconds);
      }
      if (opts_.on_round) opts_.on_round(rec);
      if (!Emit(proposal, verdict)) {
        st_.finish_reason = "stop";
        break;
      }
      if (remaining() > 0) CommitToDrafter(verdict.accepted, verdict.next_token);
    }
    if (st_.finish_reason.empty()) st_.finish_reason = "length";
    if (ahead_) ahead_->Wait();  // nothing of the drafter's still runs
    if (drafter_ && !unopened_) drafter_->Close();
    verifier_.Close();
    st_.total_seconds = Since(t_start_);
    return st_;
  }

 private:
  int64_t remaining() const { return spec_.max_new_tokens - st_.generated; }

  // What this round's waits measured, for adaptive K: the first round's
  // include a remote service's prefill of the prompt (a local engine
  // prefills in Open, outside the round).
  KPolicy::Wait WaitOf(const RoundRecord& rec) const {
    const bool remote = verifier_.remote() || (drafter_ && drafter_->remote());
    if (st_.rounds == 1 && remote) return KPolicy::Wait::kWithPrefill;
    return rec.drafted_ahead ? KPolicy::Wait::kDraftedAhead : KPolicy::Wait::kOnDemand;
  }

  // Replaces a failed drafter; the replacement resumes from the committed
  // sequence with what is left of the budget.
  void FallBack(const absl::Status& why, bool at_open) {
    if (ahead_) ahead_->Wait();  // nothing of the old drafter's still runs
    if (drafter_ && !unopened_) drafter_->Close();
    unopened_ = false;
    ++st_.fallbacks;
    owned_ = opts_.make_fallback ? opts_.make_fallback(why, at_open) : nullptr;
    drafter_ = owned_.get();
    if (!drafter_) return;
    if (!drafter_->Open(Resumed()).ok()) {
      owned_.reset();
      drafter_ = nullptr;
    }
  }

  // The spec a drafter opened now starts from: the committed sequence, what
  // is left of the budget, its rounds counted from this one.
  SessionSpec Resumed() {
    draft_base_ = round_;
    SessionSpec resumed = spec_;
    resumed.prompt = sequence_;
    resumed.max_new_tokens = std::max<int64_t>(0, remaining());
    return resumed;
  }

  // A round commits at most k + 1 tokens; drafting past the budget is waste.
  int32_t NextK() const { return drafter_ ? Capped(opts_.k.Next()) : 0; }
  int32_t Capped(int32_t k) const { return static_cast<int32_t>(std::min<int64_t>(k, remaining() - 1)); }

  // The first round with K > 0 of a request that began with plain rounds:
  // the drafter opens at the committed sequence, as a fallback's replacement
  // does. A remote drafter's open costs this round nothing (the `open` is
  // only sent), and its prefill is awaited on the loop's worker, the rounds
  // staying plain until it is done while their verdicts are committed
  // behind it: a late open never holds up the target. A local drafter
  // prefills here, in this round.
  void OpenLate(RoundRecord& rec) {
    unopened_ = false;
    const auto t0 = Clock::now();
    absl::Status s = drafter_->Open(Resumed());
    rec.draft_wall += Since(t0);
    if (!s.ok()) {
      FallBack(s, /*at_open=*/true);
      rec.k = NextK();
      return;
    }
    if (drafter_->remote() && ahead_) {
      opening_.store(true);
      Drafter* d = drafter_;
      ahead_->Start([this, d] {
        deferred_ = d->AwaitOpen();  // a failed open: replaced at the next drafting round
        opening_.store(false);
      });
      rec.k = 0;
    }
  }

  // A failed drafter is replaced and the replacement proposes this round.
  // K = 0 (plain decoding, adaptive K under load) never calls the drafter.
  Proposal Propose(RoundRecord& rec) {
    // The policy's choice, kept with its reason for the metrics.
    if (drafter_) rec.choice = opts_.k.Choose();
    rec.k = rec.choice ? Capped(rec.choice->k) : 0;
    proposed_ = false;
    if (drafter_) rec.drafter = std::string(drafter_->name());
    if (unopened_ && rec.k > 0) OpenLate(rec);
    if (opening_.load()) rec.k = 0;  // the drafter's prefill is still awaited aside: plain rounds meanwhile
    if (rec.k == 0 || !drafter_) return Proposal{};
    // The look-ahead (or the late open) is done before the drafter proposes
    // again; a drafter that failed in it is replaced now.
    if (ahead_) ahead_->Wait();
    if (!deferred_.ok()) {
      FallBack(std::exchange(deferred_, absl::OkStatus()), /*at_open=*/false);
      rec.k = NextK();
      if (rec.k == 0) return Proposal{};
    }
    Proposal proposal;
    double compute = 0;
    for (int attempt = 0; drafter_ && !proposed_ && attempt < 2; ++attempt) {
      const auto t0 = Clock::now();
      absl::StatusOr<Proposal> p = drafter_->Propose(round_ - draft_base_, rec.k);
      rec.draft_wall += Since(t0);
      if (!p.ok()) {
        FallBack(p.status(), /*at_open=*/false);
        continue;
      }
      proposal = std::move(*p);
      proposed_ = true;
      compute = drafter_->remote() ? std::min(rec.draft_wall, proposal.compute_seconds) : rec.draft_wall;
      rec.drafter = proposal.looked_up ? "lookup" : std::string(drafter_->name());
    }
    rec.drafted = static_cast<int32_t>(proposal.tokens.size());
    rec.drafted_ahead = proposal.drafted_ahead;
    rec.draft_seconds = compute;
    rec.network_seconds = rec.draft_wall - compute;
    if (ahead_ && proposed_ && rec.drafted > 0) {
      Drafter* d = drafter_;
      const int32_t next_k = static_cast<int32_t>(std::min<int64_t>(opts_.k.Next(), remaining() - rec.drafted - 2));
      ahead_->Start([d, next_k] { d->PrepareAhead(next_k); });
    }
    return proposal;
  }

  // Tells an open drafter the verdict of the round just verified (round_ is
  // already the next one). It does not wait for the drafter: a remote one
  // only sends it, and plain rounds never wait for the draft service. While
  // a late open is awaited aside the commit is sent beside it (deferred_
  // belongs to the worker then); otherwise the look-ahead finishes first (it
  // works on the same session). A failure replaces the drafter at the next
  // round that drafts.
  void CommitToDrafter(int32_t accepted, TokenId next) {
    if (!drafter_ || unopened_) return;
    const bool opening = opening_.load();
    if (!opening) {
      if (ahead_) ahead_->Wait();
      if (!deferred_.ok()) return;
    }
    absl::Status s = drafter_->Commit(Verdict{round_ - 1 - draft_base_, accepted, next});
    if (!s.ok() && !opening) deferred_ = std::move(s);
  }

  absl::StatusOr<RoundResult> Verify(const Proposal& proposal, RoundRecord& rec) {
    const auto t0 = Clock::now();
    absl::StatusOr<RoundResult> verdict = verifier_.Verify(round_, proposal);
    RETURN_IF_ERROR(verdict.status());
    rec.verify_wall = Since(t0);
    rec.accepted = verdict->accepted;
    rec.verify_seconds = std::min(rec.verify_wall, verdict->compute_seconds);
    rec.network_seconds += rec.verify_wall - rec.verify_seconds;
    ++round_;
    return verdict;
  }

  // Emits d1..dn and the next token, cut at a stop token and the budget.
  // False when the request ends here.
  bool Emit(const Proposal& proposal, const RoundResult& verdict) {
    std::vector<TokenId> emitted(proposal.tokens.begin(), proposal.tokens.begin() + verdict.accepted);
    emitted.push_back(verdict.next_token);
    bool stop = false;
    for (size_t i = 0; i < emitted.size(); ++i) {
      if (std::find(opts_.stop_tokens.begin(), opts_.stop_tokens.end(), emitted[i]) != opts_.stop_tokens.end()) {
        emitted.resize(i);
        stop = true;
        break;
      }
    }
    if (static_cast<int64_t>(emitted.size()) > remaining()) emitted.resize(remaining());
    sequence_.insert(sequence_.end(), emitted.begin(), emitted.end());
    if (st_.generated == 0) st_.first_token_seconds = Since(t_start_);
    st_.generated += static_cast<int64_t>(emitted.size());
    if (!emitted.empty() && opts_.on_logprobs && !verdict.logprobs.empty()) {
      opts_.on_logprobs(absl::MakeConstSpan(verdict.logprobs).first(std::min(emitted.size(), verdict.logprobs.size())));
    }
    if (!emitted.empty() && opts_.on_tokens && !opts_.on_tokens(emitted)) stop = true;
    return !stop;
  }

  const Clock::time_point t_start_ = Clock::now();
  const SessionSpec& spec_;
  Verifier& verifier_;
  LoopOptions& opts_;
  Drafter* drafter_;
  std::unique_ptr<Drafter> owned_;  // the fallback, once made
  std::unique_ptr<AsyncWorker> ahead_;
  std::vector<TokenId> sequence_;   // committed so far
  int64_t round_ = 0;               // the verifier's round
  int64_t draft_base_ = 0;          // the verifier's round the drafter opened at (its round 0)
  bool proposed_ = false;           // this round has a proposal
  bool unopened_ = false;           // the drafter opens at the first round with K > 0
  std::atomic<bool> opening_{false};  // ...and its prefill is still awaited on the worker
  absl::Status deferred_;           // the drafter failed aside (a late open, a commit): replaced next
  LoopStats st_;
};

}  // namespace

void LoopStats::Add(const RoundRecord& r) {
  ++rounds;
  last_k = r.k;
  drafted += r.drafted;
  accepted += r.accepted;
  ahead_hits += r.drafted_ahead;
  draft_seconds += r.draft_seconds;
  verify_seconds += r.verify_seconds;
  network_seconds += r.network_seconds;
  if (static_cast<int32_t>(drafted_at.size()) < r.drafted) {
    drafted_at.resize(r.drafted);
    accepted_at.resize(r.drafted);
  }
  for (int32_t i = 0; i < r.drafted; ++i) {
    ++drafted_at[i];
    accepted_at[i] += i < r.accepted;
  }
  if (static_cast<int32_t>(accepted_hist.size()) <= r.accepted) accepted_hist.resize(r.accepted + 1);
  ++accepted_hist[r.accepted];
}

absl::StatusOr<LoopStats> RunSpeculative(const SessionSpec& spec, Drafter* drafter, Verifier& verifier,
                                         LoopOptions& opts) {
  return Loop(spec, drafter, verifier, opts).Run();
}

}  // namespace specserve
