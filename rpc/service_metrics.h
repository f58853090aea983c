// The metrics every model service exports (docs/metrics.md "Services"), each with a
// constant label role="draft" or role="target" so one dashboard serves both.
// Updated only by the scheduler thread, read by the exposer's thread
// (prometheus-cpp metrics are thread-safe).
#pragma once

#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace specserve::rpc {

struct ServiceMetrics {
  ServiceMetrics(prometheus::Registry& registry, const std::string& role);

  prometheus::Gauge& active_sessions;     // specserve_active_sessions
  prometheus::Gauge& kv_blocks_used;      // specserve_kv_blocks_used
  prometheus::Gauge& kv_blocks_capacity;  // specserve_kv_blocks_capacity: blocks in the pool (a gauge: no _total)
  // specserve_kv_blocks_reserved: blocks promised to open sessions by
  // admission (what they may grow to); used <= reserved <= capacity.
  prometheus::Gauge& kv_blocks_reserved;
  prometheus::Gauge& sessions_waiting;    // specserve_sessions_waiting: queued for KV or a session slot
  prometheus::Histogram& batch_size;      // specserve_batch_size: sequences per forward pass
  prometheus::Histogram& forward_seconds; // specserve_forward_duration_seconds
  prometheus::Counter& rollback_tokens;   // specserve_rollback_tokens_total: KV positions truncated
  // Prefix caching (--prefix-cache): sessions that looked up their prompt's
  // whole blocks, those that found some, the positions attached instead of
  // computed, and the cached blocks no session holds (reusable, evictable).
  prometheus::Counter& prefix_cache_queries;     // specserve_prefix_cache_queries_total
  prometheus::Counter& prefix_cache_hits;        // specserve_prefix_cache_hits_total
  prometheus::Counter& prefix_cache_hit_tokens;  // specserve_prefix_cache_hit_tokens_total
  prometheus::Gauge& prefix_cache_blocks;        // specserve_prefix_cache_blocks
  // The target's verify step (Backend::ForwardVerify): its time per batched
  // round (specserve_verify_duration_seconds; on CUDA the kernels' device
  // time) and where it ran (specserve_verify_location{location} = 1).
  prometheus::Histogram& verify_seconds;
  // specserve_verify_bytes_to_host_total: device -> host bytes of the verify
  // steps (0 on the CPU; O(K) per session and round on CUDA).
  prometheus::Counter& verify_bytes_to_host;
  void VerifiedOn(const std::string& location);

  // specserve_sessions_total{status}: how sessions ended. status is a
  // lowercase gRPC code name ("ok", "cancelled", "resource_exhausted", ...).
  prometheus::Counter& Sessions(const std::string& status);

 private:
  prometheus::Family<prometheus::Counter>& sessions_;
  prometheus::Family<prometheus::Gauge>& verify_location_;
};

// "OK" -> "ok", RESOURCE_EXHAUSTED -> "resource_exhausted", ... (a fixed, small set).
std::string StatusLabel(int grpc_code);

}  // namespace specserve::rpc
