// The coordinator's Prometheus metrics (docs/metrics.md "Coordinator"), registered once
// with cached handles. Names are fixed: the Grafana dashboard (deploy/)
// reads them. Labels stay low-cardinality: status codes, drafter kinds,
// draft positions 1..16, phases, fallback reasons.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "coordinator/k_policy.h"
#include "coordinator/round_loop.h"

namespace specserve {

class CoordinatorMetrics {
 public:
  static constexpr int kMaxPosition = 16;  // K <= 16 on the public API

 private:
  // Declared first: members initialise in declaration order and the handles below use these.
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Counter>& proposed_;
  prometheus::Family<prometheus::Counter>& accepted_;
  prometheus::Family<prometheus::Counter>& fallbacks_;
  prometheus::Family<prometheus::Histogram>& round_;
  prometheus::Histogram& accepted_length_;      // specserve_accepted_length: accepted tokens per round
  prometheus::Histogram& round_k_;              // specserve_round_k: tokens drafted per round
  std::array<prometheus::Counter*, kMaxPosition> position_proposed_{};  // {position="1".."16"}
  std::array<prometheus::Counter*, kMaxPosition> position_accepted_{};
  std::array<prometheus::Counter*, KPolicy::kReasons> k_choices_{};  // specserve_k_choices_total{reason}
  prometheus::Histogram& k_promised_gain_;      // specserve_k_promised_gain: best K > 0 over plain, predicted

 public:
  explicit CoordinatorMetrics(prometheus::Registry& registry);

  // specserve_requests_total{status}: status is a lowercase gRPC code name.
  prometheus::Counter& Requests(const std::string& status) { return requests_.Add({{"status", status}}); }
  // specserve_draft_tokens_{proposed,accepted}_total{drafter}: "model", "lookup", "ngram".
  prometheus::Counter& Proposed(const std::string& drafter) { return proposed_.Add({{"drafter", drafter}}); }
  prometheus::Counter& Accepted(const std::string& drafter) { return accepted_.Add({{"drafter", drafter}}); }
  // specserve_drafter_fallbacks_total{reason}: "open_error", "propose_error", "timeout",
  // "no_draft_service" (a cancelled request is not a draft failure and is not counted).
  prometheus::Counter& Fallbacks(const std::string& reason) { return fallbacks_.Add({{"reason", reason}}); }

  // One verified round: its tokens by drafter and position, its K and why
  // the policy chose it, and its time by phase.
  void ObserveRound(const RoundRecord& r);

  // Running totals since start, for the periodic stats line (stats_log.h).
  struct Totals {
    double tokens = 0;  // specserve_generated_tokens_total
    int64_t rounds = 0, drafted = 0, accepted = 0;
  };
  Totals totals() const {
    return Totals{generated_tokens.Value(), rounds_.load(), drafted_.load(), accepted_total_.load()};
  }

  prometheus::Counter& generated_tokens;        // specserve_generated_tokens_total
  prometheus::Histogram& round_draft;           // specserve_round_duration_seconds{phase="draft"}
  prometheus::Histogram& round_verify;          // ...{phase="verify"}
  prometheus::Histogram& round_network;         // ...{phase="network"}: call wall time minus service time
  prometheus::Histogram& time_to_first_token;   // specserve_time_to_first_token_seconds
  prometheus::Histogram& inter_token_latency;   // specserve_inter_token_latency_seconds
  prometheus::Gauge& speculation_k;             // specserve_speculation_k: K of the latest round
  prometheus::Histogram& request_duration;      // specserve_request_duration_seconds: arrival to final, OK requests
  prometheus::Gauge& requests_running;          // specserve_requests_running: in their round loop (gRPC and HTTP)
  prometheus::Gauge& requests_waiting;          // specserve_requests_waiting: in the queue, or first round not begun
  prometheus::Histogram& queue_time;            // specserve_queue_time_seconds: arrival to the first round

 private:
  std::atomic<int64_t> rounds_{0}, drafted_{0}, accepted_total_{0};
};

// One request's place in specserve_requests_waiting and _running, from its
// worker's start to its end: waiting until Started(), running after.
class RequestGauges {
 public:
  explicit RequestGauges(CoordinatorMetrics* m) : m_(m) {
    if (m_) m_->requests_waiting.Increment();
  }
  ~RequestGauges() {
    if (m_) (started_ ? m_->requests_running : m_->requests_waiting).Decrement();
  }
  RequestGauges(const RequestGauges&) = delete;
  RequestGauges& operator=(const RequestGauges&) = delete;
  // The first round begins: observes the queue time from `arrived`.
  void Started(std::chrono::steady_clock::time_point arrived) {
    if (!m_ || started_) return;
    started_ = true;
    m_->requests_waiting.Decrement();
    m_->requests_running.Increment();
    m_->queue_time.Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - arrived).count());
  }

 private:
  CoordinatorMetrics* m_;
  bool started_ = false;
};

}  // namespace specserve
