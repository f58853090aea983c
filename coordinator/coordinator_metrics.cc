#include "coordinator/coordinator_metrics.h"

#include <algorithm>

#include "rpc/metrics_server.h"

namespace specserve {
namespace {

prometheus::Family<prometheus::Counter>& CounterFamily(prometheus::Registry& r, const char* name, const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r);
}

prometheus::Histogram& LatencyHistogram(prometheus::Registry& r, const char* name, const char* help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add({}, rpc::LatencyBuckets());
}

}  // namespace

CoordinatorMetrics::CoordinatorMetrics(prometheus::Registry& r)
    : requests_(CounterFamily(r, "specserve_requests_total", "Generation requests by final status")),
      proposed_(CounterFamily(r, "specserve_draft_tokens_proposed_total", "Draft tokens sent for verification")),
      accepted_(CounterFamily(r, "specserve_draft_tokens_accepted_total", "Draft tokens the target accepted")),
      fallbacks_(CounterFamily(r, "specserve_drafter_fallbacks_total",
                               "Drafter failures survived by falling back (n-gram or plain decoding)")),
      round_(prometheus::BuildHistogram()
                 .Name("specserve_round_duration_seconds")
                 .Help("Time of one round by phase: draft and verify as the services report it, "
                       "network the rest of those calls' wall time")
                 .Register(r)),
      accepted_length_(prometheus::BuildHistogram()
                           .Name("specserve_accepted_length")
                           .Help("Draft tokens accepted per round (rounds that drafted)")
                           .Register(r)
                           .Add({}, rpc::CountBuckets(kMaxPosition))),
      round_k_(prometheus::BuildHistogram()
                   .Name("specserve_round_k")
                   .Help("Tokens drafted per round (K; 0 for a plain step)")
                   .Register(r)
                   .Add({}, rpc::CountBuckets(kMaxPosition))),
      k_promised_gain_(prometheus::BuildHistogram()
                           .Name("specserve_k_promised_gain")
                           .Help("Adaptive K: the best K > 0's predicted token rate over plain decoding's, "
                                 "before the load margins, each round it compared them")
                           .Register(r)
                           .Add({}, prometheus::Histogram::BucketBoundaries{0.5, 0.8, 0.9, 1.0, 1.1, 1.25, 1.4,
                                                                            1.6, 2.0, 3.0})),
      generated_tokens(CounterFamily(r, "specserve_generated_tokens_total", "Tokens returned to clients").Add({})),
      round_draft(round_.Add({{"phase", "draft"}}, rpc::LatencyBuckets())),
      round_verify(round_.Add({{"phase", "verify"}}, rpc::LatencyBuckets())),
      round_network(round_.Add({{"phase", "network"}}, rpc::LatencyBuckets())),
      time_to_first_token(LatencyHistogram(r, "specserve_time_to_first_token_seconds",
                                           "From request arrival to its first token sent")),
      inter_token_latency(LatencyHistogram(r, "specserve_inter_token_latency_seconds",
                                           "Time between tokens sent (a round's gap spread over its tokens)")),
      speculation_k(prometheus::BuildGauge()
                        .Name("specserve_speculation_k")
                        .Help("Tokens drafted in the latest round (K)")
                        .Register(r)
                        .Add({})),
      request_duration(LatencyHistogram(r, "specserve_request_duration_seconds",
                                        "From request arrival to its final message, requests that succeeded")),
      requests_running(prometheus::BuildGauge()
                           .Name("specserve_requests_running")
                           .Help("Requests in their round loop (gRPC and HTTP)")
                           .Register(r)
                           .Add({})),
      requests_waiting(prometheus::BuildGauge()
                           .Name("specserve_requests_waiting")
                           .Help("Requests waiting for a run slot (--max-sessions) or for their first round (planning, tokenizing)")
                           .Register(r)
                           .Add({})),
      queue_time(LatencyHistogram(r, "specserve_queue_time_seconds",
                                  "From request arrival to the start of its first round")) {
  auto& pos_proposed = CounterFamily(r, "specserve_draft_position_proposed_total",
                                     "Draft tokens proposed at each position of a round (1 = first)");
  auto& pos_accepted = CounterFamily(r, "specserve_draft_position_accepted_total",
                                     "Draft tokens accepted at each position of a round (1 = first)");
  for (int i = 0; i < kMaxPosition; ++i) {
    position_proposed_[i] = &pos_proposed.Add({{"position", std::to_string(i + 1)}});
    position_accepted_[i] = &pos_accepted.Add({{"position", std::to_string(i + 1)}});
  }
  auto& choices = CounterFamily(r, "specserve_k_choices_total",
                                "Rounds with a drafter by why the K policy chose their K (docs/metrics.md)");
  for (int i = 0; i < KPolicy::kReasons; ++i) {
    k_choices_[i] = &choices.Add({{"reason", KPolicy::ReasonName(static_cast<KPolicy::Reason>(i))}});
  }
}

void CoordinatorMetrics::ObserveRound(const RoundRecord& r) {
  round_verify.Observe(r.verify_seconds);
  round_network.Observe(r.network_seconds);
  if (r.drafter != "none") round_draft.Observe(r.draft_seconds);
  const int k = r.drafted, accepted = r.accepted;
  rounds_.fetch_add(1);
  drafted_.fetch_add(k > 0 ? k : 0);
  accepted_total_.fetch_add(k > 0 ? accepted : 0);
  speculation_k.Set(k);
  round_k_.Observe(k);
  if (r.choice) {
    k_choices_[static_cast<int>(r.choice->reason)]->Increment();
    if (r.choice->gain > 0) k_promised_gain_.Observe(r.choice->gain);
  }
  if (k <= 0) return;
  Proposed(r.drafter).Increment(k);
  Accepted(r.drafter).Increment(accepted);
  accepted_length_.Observe(accepted);
  for (int i = 0; i < std::min(k, kMaxPosition); ++i) {
    position_proposed_[i]->Increment();
    if (i < accepted) position_accepted_[i]->Increment();
  }
}

}  // namespace specserve
