#include "rpc/metrics_server.h"

#include <exception>

#include <prometheus/gauge.h>

#include "absl/strings/str_cat.h"
#include "common/build_info.h"

namespace specserve::rpc {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(int port, const std::string& host) {
  auto m = std::unique_ptr<MetricsServer>(new MetricsServer());
  const BuildInfo& b = GetBuildInfo();
  prometheus::BuildGauge()
      .Name("specserve_build_info")
      .Help("Always 1: the version, git commit, compiler and backends of this binary in its labels")
      .Register(*m->registry_)
      .Add({{"version", b.version}, {"git_sha", b.git_sha}, {"compiler", b.compiler}, {"backend", b.backend}})
      .Set(1);
  if (port == 0) return m;
  try {
    // civetweb serves a connection per worker thread and waits this long for
    // a request on it: enough workers and a short wait, so idle connections
    // cannot hold every worker and block the scrapes.
    const std::string address = host.find(':') != std::string::npos && host.front() != '['
                                    ? absl::StrCat("[", host, "]:", port)
                                    : absl::StrCat(host, ":", port);
    m->exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", address, "num_threads", "16", "request_timeout_ms", "2000"});
  } catch (const std::exception& e) {  // civetweb cannot bind: the port is taken
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", host, ":", port, ": ", e.what()));
  }
  m->exposer_->RegisterCollectable(m->registry_);
  m->port_ = port;
  return m;
}

prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
          0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30};
}

prometheus::Histogram::BucketBoundaries CountBuckets(int n) {
  prometheus::Histogram::BucketBoundaries b;
  for (int i = 0; i <= n; ++i) b.push_back(i);
  return b;
}

}  // namespace specserve::rpc
