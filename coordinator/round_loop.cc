#include "coordinator/round_loop.h"

#include <algorithm>
#include <chrono>

#include "common/status_macros.h"
#include "coordinator/async_worker.h"

namespace specserve {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The drafter in use, with its own round numbering (a fallback starts at 0).
struct DraftState {
  Drafter* drafter = nullptr;
  std::unique_ptr<Drafter> owned;  // the fallback, once made
  int64_t round = 0;
  std::optional<RoundResult> last;
};

}  // namespace

absl::StatusOr<LoopStats> RunSpeculative(const SessionSpec& spec, Drafter* drafter, Verifier& verifier,
                                         LoopOptions& opts) {
  const auto t_start = Clock::now();
  LoopStats st;
  RETURN_IF_ERROR(verifier.Open(spec));
  std::vector<TokenId> sequence = spec.prompt;  // committed so far
  DraftState ds;
  ds.drafter = drafter;

  auto fall_back = [&]() {
    if (ds.drafter) ds.drafter->Close();
    ++st.fallbacks;
    ds.owned = opts.make_fallback ? opts.make_fallback() : nullptr;
    ds.drafter = ds.owned.get();
    ds.round = 0;
    ds.last.reset();
    if (ds.drafter) {
      SessionSpec resumed = spec;
      resumed.prompt = sequence;
      resumed.max_new_tokens = std::max(0, spec.max_new_tokens - static_cast<int32_t>(st.generated));
      if (!ds.drafter->Open(resumed).ok()) {
        ds.owned.reset();
        ds.drafter = nullptr;
      }
    }
  };
  if (ds.drafter && !ds.drafter->Open(spec).ok()) fall_back();

  std::unique_ptr<AsyncWorker> ahead;
  if (opts.overlap) ahead = std::make_unique<AsyncWorker>();
  int64_t round = 0;
  while (st.generated < spec.max_new_tokens) {
    const int64_t remaining = spec.max_new_tokens - st.generated;
    // A round commits at most k + 1 tokens; drafting past the budget is waste.
    int32_t k = ds.drafter ? static_cast<int32_t>(std::min<int64_t>(opts.k.Next(), remaining - 1)) : 0;
    Proposal proposal;
    bool proposed = false;
    double draft_s = 0;
    // Called even with k = 0 so the drafter hears every verdict in order. A
    // failed drafter is replaced and the replacement proposes this round.
    for (int attempt = 0; ds.drafter && !proposed && attempt < 2; ++attempt) {
      const auto t0 = Clock::now();
      absl::StatusOr<Proposal> p = ds.drafter->Propose(ds.round, ds.last, k);
      draft_s += Since(t0);
      if (p.ok()) {
        proposal = std::move(*p);
        st.draft_compute_seconds += proposal.compute_seconds;
        st.ahead_hits += proposal.drafted_ahead;
        ++ds.round;
        proposed = true;
      } else {
        fall_back();
      }
    }
    st.draft_seconds += draft_s;
    const int32_t drafted = static_cast<int32_t>(proposal.tokens.size());
    const auto t1 = Clock::now();
    if (ahead && proposed && drafted > 0) {
      Drafter* d = ds.drafter;
      const int32_t next_k = static_cast<int32_t>(std::min<int64_t>(opts.k.Next(), remaining - drafted - 2));
      ahead->Start([d, next_k] { d->PrepareAhead(next_k); });
    }
    absl::StatusOr<RoundResult> verified = verifier.Verify(round, proposal);
    if (ahead) ahead->Wait();
    RETURN_IF_ERROR(verified.status());
    RoundResult r = *verified;
    const double verify_s = Since(t1);
    st.verify_seconds += verify_s;
    st.verify_compute_seconds += r.compute_seconds;
    if (proposed) ds.last = RoundResult{ds.round - 1, r.accepted, r.next_token};
    opts.k.Observe(drafted, r.accepted, draft_s, verify_s);
    if (opts.on_round) opts.on_round(drafted, r.accepted);
    st.last_k = k;
    ++st.rounds;
    ++round;
    st.drafted += drafted;
    st.accepted += r.accepted;
    if (static_cast<int32_t>(st.drafted_at.size()) < drafted) {
      st.drafted_at.resize(drafted);
      st.accepted_at.resize(drafted);
    }
    for (int32_t i = 0; i < drafted; ++i) {
      ++st.drafted_at[i];
      st.accepted_at[i] += i < r.accepted;
    }
    if (static_cast<int32_t>(st.accepted_hist.size()) <= r.accepted) st.accepted_hist.resize(r.accepted + 1);
    ++st.accepted_hist[r.accepted];

    std::vector<TokenId> emitted(proposal.tokens.begin(), proposal.tokens.begin() + r.accepted);
    emitted.push_back(r.next_token);
    bool stop = false;
    for (size_t i = 0; i < emitted.size(); ++i) {
      if (std::find(opts.stop_tokens.begin(), opts.stop_tokens.end(), emitted[i]) != opts.stop_tokens.end()) {
        emitted.resize(i);
        stop = true;
        break;
      }
    }
    if (static_cast<int64_t>(emitted.size()) > remaining) emitted.resize(remaining);
    sequence.insert(sequence.end(), emitted.begin(), emitted.end());
    if (st.generated == 0) st.first_token_seconds = Since(t_start);
    st.generated += static_cast<int64_t>(emitted.size());
    if (!emitted.empty() && opts.on_tokens && !opts.on_tokens(emitted)) stop = true;
    if (stop) {
      st.finish_reason = "stop";
      break;
    }
  }
  if (st.finish_reason.empty()) st.finish_reason = "length";
  if (ds.drafter) ds.drafter->Close();
  verifier.Close();
  st.total_seconds = Since(t_start);
  return st;
}

}  // namespace specserve
