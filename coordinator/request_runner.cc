#include "coordinator/request_runner.h"

#include <algorithm>
#include <deque>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/drafters.h"
#include "coordinator/round_loop.h"
#include "coordinator/text_stream.h"

namespace specserve {
namespace {

using SteadyClock = std::chrono::steady_clock;
double Since(SteadyClock::time_point t0) { return std::chrono::duration<double>(SteadyClock::now() - t0).count(); }

// Target errors keep the code when it speaks to the client; the rest mean
// the target is unusable now: UNAVAILABLE, so the client may retry.
absl::Status MapTargetError(const absl::Status& s, const RequestContext& rc) {
  if (rc.cancel->cancelled()) return absl::CancelledError("request cancelled");
  if (std::chrono::system_clock::now() >= rc.deadline) return absl::DeadlineExceededError("deadline exceeded");
  // The target did not answer within --verify-timeout-s: it is stalled.
  if (absl::IsDeadlineExceeded(s)) return absl::UnavailableError(absl::StrCat("target failed: ", s.message()));
  if (absl::IsInvalidArgument(s) || absl::IsResourceExhausted(s) || absl::IsUnavailable(s)) return s;
  return absl::UnavailableError(absl::StrCat("target failed: ", s.message()));
}

void ToProto(const TokenLogprob& t, v1::TokenLogprob* out) {
  out->set_token_id(t.id);
  out->set_logprob(t.logprob);
  for (const TopLogprob& a : t.top) {
    v1::TopLogprob* p = out->add_top_logprobs();
    p->set_token_id(a.id);
    p->set_logprob(a.logprob);
  }
}

// One request's run: the drafter and verifier on the services, the text
// stream that turns committed tokens into deltas, and the statistics.
class GenerationRun {
 public:
  GenerationRun(Plan plan, const CoordinatorOptions& opts, RequestContext& rc)
      : plan_(std::move(plan)), opts_(opts), rc_(rc), up_(*rc.upstreams),
        text_(up_.tokenizer(), plan_.spec.prompt, plan_.stops) {}

  absl::StatusOr<v1::Final> Run() {
    RemoteOptions remote{rc_.cancel, rc_.deadline};
    if (!rc_.request_id.empty()) remote.metadata.emplace_back("x-request-id", rc_.request_id);
    if (!rc_.trace.trace_id.empty()) remote.metadata.emplace_back(kTraceparentHeader, rc_.trace.Header());
    RemoteOptions remote_draft = remote;
    remote_draft.call_timeout = opts_.draft_timeout;
    remote_draft.open_ms_per_token = opts_.draft_open_ms_per_token;
    remote.call_timeout = opts_.verify_timeout;
    // The API's choice becomes a registry entry here; past this point the
    // drafter is known by its entry's name and id.
    DrafterEnv env;
    env.draft_model = [&]() -> std::unique_ptr<Drafter> {
      v1::DraftService::StubInterface* stub = up_.draft();
      return stub ? std::make_unique<RemoteDrafter>(stub, remote_draft) : nullptr;
    };
    MadeDrafter made = MakeDrafter(DrafterFor(plan_.drafter), env);
    if (made.stood_in) CountFallback(up_.draft_circuit_open() ? "circuit_open" : "no_draft_service");
    drafter_name_ = made.entry ? std::string(made.entry->name) : "none";
    RemoteVerifier verifier(up_.target(), remote);
    const TargetLoadBoard::Live live = up_.target_load().Join();  // before MakeLoopOptions reads the board
    LoopOptions loop = MakeLoopOptions(made.entry);
    absl::StatusOr<LoopStats> ls = RunSpeculative(plan_.spec, made.drafter.get(), verifier, loop);
    if (!ls.ok()) return MapTargetError(ls.status(), rc_);
    if (client_gone_ || rc_.cancel->cancelled()) return absl::CancelledError("request cancelled");
    if (!stopped_by_string_) Emit(text_.Finish());
    return Finish(*ls);
  }

 private:
  // `drafter`: the entry of the drafter the request starts with (null: none).
  LoopOptions MakeLoopOptions(const DrafterEntry* drafter) {
    LoopOptions loop;
    loop.k = plan_.k;
    // Adaptive K starts from the target's load as other requests last saw it
    // (coordinator/target_load_board.h) and keeps the board current.
    if (std::optional<TargetLoadBoard::Report> r = up_.target_load().Latest()) {
      loop.k.ObserveTarget(r->load, r->network_seconds);
    }
    // ... and from the acceptance and draft cost the last request that
    // drafted with the same drafter measured.
    const int kind = drafter ? drafter->id : -1;
    if (std::optional<KPolicy> learned = up_.target_load().LatestPolicy(kind)) loop.k.Seed(*learned);
    loop.on_target_load = [this](const TargetLoad& load, double network_seconds) {
      up_.target_load().Post(load, network_seconds);
    };
    loop.on_policy = [this, kind](const KPolicy& k) { up_.target_load().PostPolicy(kind, k); };
    // The draft and target services run on their own machines: nothing stops
    // the draft from working during the verify (the n-gram drafter gains nothing).
    loop.overlap = opts_.overlap && drafter && drafter->caps.drafts_ahead;
    loop.stop_tokens = plan_.stop_token_ids;
    loop.stop_tokens.push_back(up_.tokenizer().eos());
    loop.on_tokens = [this](absl::Span<const TokenId> ids) {
      TextStream::Release rel = text_.Push(ids);
      stopped_by_string_ = rel.stopped;
      Emit(std::move(rel));
      return !stopped_by_string_ && !client_gone_ && !rc_.cancel->cancelled();
    };
    // Logprobs wait in order with their ids, released with them (TextStream
    // releases ids in commit order; those after a stop string never go out).
    loop.on_logprobs = [this](absl::Span<const TokenLogprob> lps) {
      held_logprobs_.insert(held_logprobs_.end(), lps.begin(), lps.end());
    };
    loop.on_round = [this](const RoundRecord& r) {
      if (rc_.metrics) rc_.metrics->ObserveRound(r);
    };
    loop.make_fallback = [this](const absl::Status& why, bool at_open) -> std::unique_ptr<Drafter> {
      // The request's own end (the client cancelled or went away, or its
      // deadline passed: the draft call has the same deadline and may fail
      // before the request sees it) says nothing about the draft service.
      if (RequestOver()) return nullptr;
      up_.DraftFailed(why.ToString());
      CountFallback(absl::IsDeadlineExceeded(why) ? "timeout" : at_open ? "open_error" : "propose_error");
      drafter_name_ = std::string(FallbackDrafter().name);
      return MakeFallbackDrafter();
    };
    return loop;
  }

  bool RequestOver() const {
    // A few milliseconds of slack: the draft call's deadline timer and this clock are not the same.
    return rc_.cancel->cancelled() ||
           std::chrono::system_clock::now() + std::chrono::milliseconds(5) >= rc_.deadline;
  }

  void CountFallback(const std::string& reason) {
    ++fallbacks_;
    if (rc_.metrics) rc_.metrics->Fallbacks(reason).Increment();
  }

  void Emit(TextStream::Release rel) {
    if (rel.ids.empty() && rel.text.empty()) return;
    const auto now = SteadyClock::now();
    if (!rel.ids.empty()) {
      if (tokens_ == 0) {
        ttft_ = Since(rc_.arrived);
        if (rc_.metrics) rc_.metrics->time_to_first_token.Observe(ttft_);
      } else if (rc_.metrics) {
        // A round's tokens arrive together: spread its gap evenly over them.
        const double gap = std::chrono::duration<double>(now - last_emit_).count() / rel.ids.size();
        for (size_t i = 0; i < rel.ids.size(); ++i) rc_.metrics->inter_token_latency.Observe(gap);
      }
      last_emit_ = now;
      tokens_ += static_cast<int64_t>(rel.ids.size());
      if (rc_.metrics) rc_.metrics->generated_tokens.Increment(static_cast<double>(rel.ids.size()));
    }
    v1::Delta d;
    d.set_text(std::move(rel.text));
    d.mutable_token_ids()->Add(rel.ids.begin(), rel.ids.end());
    if (plan_.spec.logprobs) {
      const size_t n = std::min(rel.ids.size(), held_logprobs_.size());
      for (size_t i = 0; i < n; ++i) ToProto(held_logprobs_[i], d.add_logprobs());
      held_logprobs_.erase(held_logprobs_.begin(), held_logprobs_.begin() + n);
    }
    if (!rc_.on_delta(std::move(d))) client_gone_ = true;
  }

  v1::Final Finish(const LoopStats& ls) const {
    v1::Final final;
    final.set_finish_reason(stopped_by_string_ ? "stop" : ls.finish_reason);
    v1::GenerationStats& stats = *final.mutable_stats();
    stats.set_tokens(tokens_);
    stats.set_prompt_tokens(static_cast<int64_t>(plan_.spec.prompt.size()));
    stats.set_time_to_first_token_seconds(ttft_);
    stats.set_rounds(ls.rounds);
    stats.set_drafted(ls.drafted);
    stats.set_accepted(ls.accepted);
    stats.set_acceptance_rate(ls.acceptance_rate());
    stats.set_total_seconds(Since(rc_.arrived));
    stats.set_tokens_per_second(stats.total_seconds() > 0 ? tokens_ / stats.total_seconds() : 0);
    stats.set_drafter(drafter_name_);
    stats.set_fallbacks(fallbacks_);
    stats.set_last_k(ls.last_k);
    stats.set_ahead_hits(ls.ahead_hits);
    stats.set_draft_seconds(ls.draft_seconds);
    stats.set_verify_seconds(ls.verify_seconds);
    stats.set_network_seconds(ls.network_seconds);
    if (rc_.metrics) rc_.metrics->request_duration.Observe(stats.total_seconds());
    return final;
  }

  const Plan plan_;
  const CoordinatorOptions& opts_;
  RequestContext& rc_;
  Upstreams& up_;
  TextStream text_;
  std::string drafter_name_;
  int32_t fallbacks_ = 0;
  int64_t tokens_ = 0;
  double ttft_ = 0;
  bool stopped_by_string_ = false;
  bool client_gone_ = false;
  SteadyClock::time_point last_emit_;
  std::deque<TokenLogprob> held_logprobs_;  // committed, not yet released
};

}  // namespace

absl::StatusOr<v1::Final> RunGeneration(const v1::GenerateRequest& req, const CoordinatorOptions& opts,
                                        RequestContext& rc) {
  log::RequestScope scope(rc.request_id, rc.trace.trace_id);
  RequestGauges gauges(rc.metrics);
  Upstreams& up = *rc.upstreams;
  ASSIGN_OR_RETURN(Plan plan, PlanRequest(req, opts, up.tokenizer(), up.config(), up.draft_configured(), &up.grammar()));
  gauges.Started(rc.arrived);
  return GenerationRun(std::move(plan), opts, rc).Run();
}

}  // namespace specserve
