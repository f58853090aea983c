#include "coordinator/request_runner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/k_policy.h"
#include "coordinator/metered_engines.h"
#include "coordinator/ngram_drafter.h"
#include "coordinator/round_loop.h"
#include "coordinator/text_stream.h"

namespace specserve {
namespace {

using SteadyClock = std::chrono::steady_clock;
double Since(SteadyClock::time_point t0) { return std::chrono::duration<double>(SteadyClock::now() - t0).count(); }

struct Plan {
  SessionSpec spec;
  KPolicy k = KPolicy::Fixed(0);
  v1::Drafter drafter = v1::DRAFTER_NONE;
  std::vector<std::string> stops;
};

absl::StatusOr<Plan> PlanRequest(const v1::GenerateRequest& req, const CoordinatorOptions& opts, Upstreams& up) {
  Plan plan;
  SessionSpec& spec = plan.spec;
  if (req.has_token_ids()) {
    spec.prompt.assign(req.token_ids().ids().begin(), req.token_ids().ids().end());
  } else if (!req.text().empty()) {
    spec.prompt = up.tokenizer().Encode(req.text(), /*add_bos=*/true);
  }
  if (spec.prompt.empty()) return absl::InvalidArgumentError("empty prompt");
  const int64_t room = up.config().n_ctx - static_cast<int64_t>(spec.prompt.size());
  if (room <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("prompt of ", spec.prompt.size(), " tokens leaves no room in the context of ",
                                                   up.config().n_ctx));
  }
  if (req.has_max_tokens()) {
    if (req.max_tokens() < 0 || req.max_tokens() > room) {
      return absl::InvalidArgumentError(absl::StrCat("max_tokens ", req.max_tokens(), " not in [0, ", room,
                                                     "] (context ", up.config().n_ctx, " minus a prompt of ",
                                                     spec.prompt.size(), " tokens)"));
    }
    spec.max_new_tokens = req.max_tokens();
  } else {
    spec.max_new_tokens = static_cast<int32_t>(std::min<int64_t>(opts.default_max_tokens, room));
  }
  spec.target.temperature = req.temperature();
  spec.target.top_k = req.top_k();
  spec.target.top_p = req.top_p() == 0 ? 1.0f : req.top_p();
  spec.target.seed = req.seed();
  // The draft samples at the user's temperature (closer q, higher acceptance);
  // verification stays exact for any q.
  spec.draft.temperature = spec.target.temperature;
  spec.draft.lookup_min_ngram = opts.draft_lookup;
  RETURN_IF_ERROR(ValidateSessionSpec(spec, up.config()));

  int k = opts.default_k;
  if (req.speculation_case() == v1::GenerateRequest::kK) {
    if (req.k() < 0 || req.k() > KPolicy::kMax) {
      return absl::InvalidArgumentError(absl::StrCat("k ", req.k(), " not in [0, ", KPolicy::kMax, "]"));
    }
    k = req.k();
  } else if (req.speculation_case() == v1::GenerateRequest::kAdaptiveK && req.adaptive_k()) {
    k = -1;
  }
  plan.k = k < 0 ? KPolicy::Adaptive() : KPolicy::Fixed(k);

  if (req.stop_size() > opts.max_stop_strings) {
    return absl::InvalidArgumentError(absl::StrCat(req.stop_size(), " stop strings (at most ", opts.max_stop_strings, ")"));
  }
  for (const std::string& s : req.stop()) {
    if (static_cast<int>(s.size()) > opts.max_stop_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("a stop string of ", s.size(), " bytes (at most ", opts.max_stop_bytes, ")"));
    }
    plan.stops.push_back(s);
  }
  if (!v1::Drafter_IsValid(req.drafter())) return absl::InvalidArgumentError("unknown drafter");
  plan.drafter = k == 0 ? v1::DRAFTER_NONE : req.drafter();
  return plan;
}

// Target errors keep the code when it speaks to the client; the rest mean
// the target is unusable now: UNAVAILABLE, so the client may retry.
absl::Status MapTargetError(const absl::Status& s, const RequestContext& rc) {
  if (rc.cancel->cancelled()) return absl::CancelledError("request cancelled");
  if (std::chrono::system_clock::now() >= rc.deadline || absl::IsDeadlineExceeded(s)) {
    return absl::DeadlineExceededError("deadline exceeded");
  }
  if (absl::IsInvalidArgument(s) || absl::IsResourceExhausted(s) || absl::IsUnavailable(s)) return s;
  return absl::UnavailableError(absl::StrCat("target failed: ", s.message()));
}

}  // namespace

absl::StatusOr<v1::Final> RunGeneration(const v1::GenerateRequest& req, const CoordinatorOptions& opts,
                                        RequestContext& rc) {
  Upstreams& up = *rc.upstreams;
  ASSIGN_OR_RETURN(Plan plan, PlanRequest(req, opts, up));
  RoundMeter meter;
  meter.metrics = rc.metrics;
  RemoteOptions remote{rc.cancel, rc.deadline};
  RemoteOptions remote_draft = remote;
  remote_draft.call_timeout = opts.draft_timeout;

  // The drafter: the draft service, else the n-gram fallback (counted when a
  // draft was wanted but is not usable), or none.
  std::unique_ptr<Drafter> drafter;
  int32_t fallbacks = 0;
  const bool wants_model = plan.drafter == v1::DRAFTER_MODEL ||
                           (plan.drafter == v1::DRAFTER_UNSPECIFIED && up.draft_configured());
  if (wants_model) {
    if (v1::DraftService::StubInterface* stub = up.draft()) {
      drafter = std::make_unique<MeteredDrafter>(std::make_unique<RemoteDrafter>(stub, remote_draft), &meter, true);
    } else {
      ++fallbacks;
      if (rc.metrics) rc.metrics->Fallbacks("no_draft_service").Increment();
    }
  }
  if (!drafter && plan.drafter != v1::DRAFTER_NONE) {
    drafter = std::make_unique<MeteredDrafter>(std::make_unique<NgramDrafter>(), &meter, false);
  }
  std::string drafter_kind = drafter ? drafter->kind() : "none";
  // The draft and target services run on their own machines: nothing stops
  // the draft from working during the verify (the n-gram drafter gains nothing).
  const bool overlap = opts.overlap && drafter_kind == "model";

  RemoteVerifier remote_verifier(up.target(), remote);
  MeteredVerifier verifier(&remote_verifier, &meter);
  TextStream text(up.tokenizer(), plan.spec.prompt, plan.stops);
  v1::GenerationStats stats;
  bool stopped_by_string = false;
  bool client_gone = false;
  SteadyClock::time_point last_emit;

  auto emit = [&](TextStream::Release rel) {
    if (rel.ids.empty() && rel.text.empty()) return;
    const auto now = SteadyClock::now();
    if (!rel.ids.empty()) {
      if (stats.tokens() == 0) {
        stats.set_time_to_first_token_seconds(Since(rc.arrived));
        if (rc.metrics) rc.metrics->time_to_first_token.Observe(stats.time_to_first_token_seconds());
      } else if (rc.metrics) {
        // A round's tokens arrive together: spread its gap evenly over them.
        const double gap = std::chrono::duration<double>(now - last_emit).count() / rel.ids.size();
        for (size_t i = 0; i < rel.ids.size(); ++i) rc.metrics->inter_token_latency.Observe(gap);
      }
      last_emit = now;
      stats.set_tokens(stats.tokens() + static_cast<int64_t>(rel.ids.size()));
      if (rc.metrics) rc.metrics->generated_tokens.Increment(static_cast<double>(rel.ids.size()));
    }
    v1::Delta d;
    d.set_text(std::move(rel.text));
    d.mutable_token_ids()->Add(rel.ids.begin(), rel.ids.end());
    if (!rc.on_delta(std::move(d))) client_gone = true;
  };

  LoopOptions loop;
  loop.k = plan.k;
  loop.overlap = overlap;
  loop.stop_tokens = {up.tokenizer().eos()};
  loop.on_tokens = [&](absl::Span<const TokenId> ids) {
    TextStream::Release rel = text.Push(ids);
    stopped_by_string = rel.stopped;
    emit(std::move(rel));
    return !stopped_by_string && !client_gone && !rc.cancel->cancelled();
  };
  loop.make_fallback = [&]() -> std::unique_ptr<Drafter> {
    if (rc.metrics) rc.metrics->Fallbacks(meter.failure).Increment();
    drafter_kind = "ngram";
    return std::make_unique<MeteredDrafter>(std::make_unique<NgramDrafter>(), &meter, false);
  };

  absl::StatusOr<LoopStats> ls = RunSpeculative(plan.spec, drafter.get(), verifier, loop);
  if (!ls.ok()) return MapTargetError(ls.status(), rc);
  if (client_gone || rc.cancel->cancelled()) return absl::CancelledError("request cancelled");
  if (!stopped_by_string) emit(text.Finish());

  v1::Final final;
  final.set_finish_reason(stopped_by_string ? "stop" : ls->finish_reason);
  stats.set_rounds(ls->rounds);
  stats.set_drafted(ls->drafted);
  stats.set_accepted(ls->accepted);
  stats.set_acceptance_rate(ls->acceptance_rate());
  stats.set_total_seconds(Since(rc.arrived));
  stats.set_tokens_per_second(stats.total_seconds() > 0 ? stats.tokens() / stats.total_seconds() : 0);
  stats.set_drafter(drafter_kind);
  stats.set_fallbacks(fallbacks + ls->fallbacks);
  stats.set_last_k(ls->last_k);
  stats.set_ahead_hits(ls->ahead_hits);
  stats.set_draft_seconds(meter.total_draft_seconds);
  stats.set_verify_seconds(meter.total_verify_seconds);
  stats.set_network_seconds(meter.total_network_seconds);
  *final.mutable_stats() = stats;
  return final;
}

}  // namespace specserve
