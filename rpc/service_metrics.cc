#include "rpc/service_metrics.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "rpc/metrics_server.h"

namespace specserve::rpc {
namespace {

prometheus::Labels Role(const std::string& role) { return {{"role", role}}; }

}  // namespace

ServiceMetrics::ServiceMetrics(prometheus::Registry& r, const std::string& role)
    : active_sessions(prometheus::BuildGauge()
                          .Name("specserve_active_sessions")
                          .Help("Sessions open on this service")
                          .Labels(Role(role))
                          .Register(r)
                          .Add({})),
      kv_blocks_used(prometheus::BuildGauge()
                         .Name("specserve_kv_blocks_used")
                         .Help("KV cache blocks holding keys and values")
                         .Labels(Role(role))
                         .Register(r)
                         .Add({})),
      kv_blocks_capacity(prometheus::BuildGauge()
                          .Name("specserve_kv_blocks_capacity")
                          .Help("KV cache blocks in the pool")
                          .Labels(Role(role))
                          .Register(r)
                          .Add({})),
      kv_blocks_reserved(prometheus::BuildGauge()
                             .Name("specserve_kv_blocks_reserved")
                             .Help("KV cache blocks reserved by admission for the open sessions to grow into")
                             .Labels(Role(role))
                             .Register(r)
                             .Add({})),
      sessions_waiting(prometheus::BuildGauge()
                           .Name("specserve_sessions_waiting")
                           .Help("Sessions waiting for KV blocks or a session slot (--queue-timeout-s)")
                           .Labels(Role(role))
                           .Register(r)
                           .Add({})),
      batch_size(prometheus::BuildHistogram()
                     .Name("specserve_batch_size")
                     .Help("Sequences per forward pass (continuous batching)")
                     .Labels(Role(role))
                     .Register(r)
                     .Add({}, prometheus::Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64, 128})),
      forward_seconds(prometheus::BuildHistogram()
                          .Name("specserve_forward_duration_seconds")
                          .Help("Wall time of one batched forward pass")
                          .Labels(Role(role))
                          .Register(r)
                          .Add({}, LatencyBuckets())),
      rollback_tokens(prometheus::BuildCounter()
                          .Name("specserve_rollback_tokens_total")
                          .Help("KV positions truncated by rollbacks (rejected draft tokens)")
                          .Labels(Role(role))
                          .Register(r)
                          .Add({})),
      prefix_cache_queries(prometheus::BuildCounter()
                               .Name("specserve_prefix_cache_queries_total")
                               .Help("Sessions that looked up their prompt's whole KV blocks in the prefix cache")
                               .Labels(Role(role))
                               .Register(r)
                               .Add({})),
      prefix_cache_hits(prometheus::BuildCounter()
                            .Name("specserve_prefix_cache_hits_total")
                            .Help("Prefix-cache lookups that attached at least one cached block")
                            .Labels(Role(role))
                            .Register(r)
                            .Add({})),
      prefix_cache_hit_tokens(prometheus::BuildCounter()
                                  .Name("specserve_prefix_cache_hit_tokens_total")
                                  .Help("Prompt positions attached from the prefix cache instead of computed")
                                  .Labels(Role(role))
                                  .Register(r)
                                  .Add({})),
      prefix_cache_blocks(prometheus::BuildGauge()
                              .Name("specserve_prefix_cache_blocks")
                              .Help("Cached KV blocks no session holds (reused on a hit, evicted when room is needed)")
                              .Labels(Role(role))
                              .Register(r)
                              .Add({})),
      verify_seconds(prometheus::BuildHistogram()
                         .Name("specserve_verify_duration_seconds")
                         .Help("Time of the verify-and-resample step of one batched verify pass (on CUDA: the "
                               "kernels' device time)")
                         .Labels(Role(role))
                         .Register(r)
                         .Add({}, prometheus::Histogram::BucketBoundaries{0.00001, 0.000025, 0.00005, 0.0001,
                                                                          0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                                          0.01, 0.025, 0.05, 0.1})),
      verify_bytes_to_host(prometheus::BuildCounter()
                               .Name("specserve_verify_bytes_to_host_total")
                               .Help("Bytes the verify steps copied from the device to the host (0 on the CPU)")
                               .Labels(Role(role))
                               .Register(r)
                               .Add({})),
      sessions_(prometheus::BuildCounter()
                    .Name("specserve_sessions_total")
                    .Help("Sessions by how they ended")
                    .Labels(Role(role))
                    .Register(r)),
      verify_location_(prometheus::BuildGauge()
                           .Name("specserve_verify_location")
                           .Help("1 for where this service runs the verify step: location=\"cpu\" or \"cuda\"")
                           .Labels(Role(role))
                           .Register(r)) {}

void ServiceMetrics::VerifiedOn(const std::string& location) { verify_location_.Add({{"location", location}}).Set(1); }

prometheus::Counter& ServiceMetrics::Sessions(const std::string& status) {
  return sessions_.Add({{"status", status}});  // Add returns the existing child for known labels
}

std::string StatusLabel(int grpc_code) {
  return absl::AsciiStrToLower(absl::StatusCodeToString(static_cast<absl::StatusCode>(grpc_code)));
}

}  // namespace specserve::rpc
