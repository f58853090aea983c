// One Prometheus registry per process and, when a port is given, the pull
// exposer serving it at http://HOST:PORT/metrics (prometheus-cpp). The
// registry starts with specserve_build_info{version,git_sha,compiler,backend} 1
// (common/build_info.h). Metrics
// are registered once at start and their handles cached (docs/style.md "Metrics").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <prometheus/exposer.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "absl/status/statusor.h"

namespace specserve::rpc {

class MetricsServer {
 public:
  // port 0: metrics are kept but not served. UNAVAILABLE when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(int port, const std::string& host = "0.0.0.0");
  prometheus::Registry& registry() { return *registry_; }
  int port() const { return port_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

// Bucket boundaries in seconds for latencies from 100 us to 30 s (x ~2.5 per step).
prometheus::Histogram::BucketBoundaries LatencyBuckets();
// 0, 1, ..., n (counts such as batch size or accepted length).
prometheus::Histogram::BucketBoundaries CountBuckets(int n);

}  // namespace specserve::rpc
