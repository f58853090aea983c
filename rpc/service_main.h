// The main() of a model service (specserve-draft, specserve-target): parse
// the flags, start /metrics and the gRPC server (health NOT_SERVING while the
// model loads), load the model, serve, and on SIGTERM drain and stop.
#pragma once

#include <cstdio>

#include "absl/strings/str_format.h"
#include "common/build_info.h"
#include "common/log.h"
#include "backends/make_backend.h"
#include "rpc/cpu_affinity.h"
#include "rpc/grpc_server.h"
#include "rpc/metrics_server.h"
#include "rpc/model_host.h"
#include "rpc/service_flags.h"
#include "rpc/service_metrics.h"

namespace specserve::rpc {

struct ServiceMainSpec {
  const char* prog;            // "specserve-draft"
  const char* usage;           // the help text's first lines
  const char* role;            // the metrics' role label: "draft", "target"
  const char* default_listen;  // "0.0.0.0:50053"
  int default_metrics_port;
};

// Service: a ModelService (DraftServer, TargetServer). Returns the exit code.
template <class Service>
int ServeModel(int argc, char** argv, const ServiceMainSpec& spec) {
  GrpcServer::BlockTerminationSignals();
  auto fail = [&](const absl::Status& s, int code) {
    log::Error(s.ToString());
    return code;
  };
  CliArgs args(spec.usage);
  DeclareServiceFlags(args, spec.default_listen, spec.default_metrics_port);
  if (int rc = ParseServiceArgs(args, argc, argv, spec.prog); rc >= 0) return rc;
  absl::StatusOr<ServiceFlags> flags = ReadServiceFlags(args);
  if (!flags.ok()) return fail(flags.status(), 2);
  // Before any thread starts, so that every thread inherits the cores.
  if (absl::Status pinned = PinProcessToCpus(flags->cpus); !pinned.ok()) return fail(pinned, 2);
  // --device before anything else touches CUDA: a bad ordinal fails here,
  // not after the model has loaded.
  if (flags->backend.kind == "cuda") {
    if (absl::Status dev = SelectCudaDevice(flags->backend.device); !dev.ok()) return fail(dev, 2);
  }

  absl::StatusOr<std::unique_ptr<MetricsServer>> metrics = MetricsServer::Start(flags->metrics_port, flags->metrics_host);
  if (!metrics.ok()) return fail(metrics.status(), 1);
  ServiceMetrics service_metrics((*metrics)->registry(), spec.role);

  Service service;
  service.SetTls(flags->server.tls);
  auto server = GrpcServer::Start(flags->server, {&service});
  if (!server.ok()) return fail(server.status(), 1);
  auto host = ModelHost::Load(*flags);
  if (!host.ok()) return fail(host.status(), 1);
  service.SetInfo((*host)->info);
  service.SetBatchGather(flags->batch_gather);
  service.SetPrefillChunk(flags->prefill_chunk_tokens);
  service.Attach(host->get(), &service_metrics, flags->max_sessions, flags->session_idle_timeout,
                 flags->queue_timeout);
  (*server)->SetServing(true);
  log::Info(absl::StrFormat("%s on %s, listening on port %d, metrics port %d", (*host)->info.name(),
                            (*host)->info.backend(), (*server)->port(), (*metrics)->port()),
            {{"version", GetBuildInfo().version}, {"git_sha", GetBuildInfo().git_sha}});

  const int sig = GrpcServer::WaitForSignal();
  log::Info(absl::StrFormat("signal %d, draining", sig));
  (*server)->Drain([&] { service.StartDraining(); }, [&] { return service.active(); });
  service.Stop();
  return 0;
}

}  // namespace specserve::rpc
