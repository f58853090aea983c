// specserve-draft: serves the draft model's proposals over gRPC
// (specserve.v1.DraftService), with health, reflection and /metrics.
#include <cstdio>

#include "rpc/metrics_server.h"
#include "rpc/model_host.h"
#include "rpc/server_runner.h"
#include "draft_service/draft_server.h"

int main(int argc, char** argv) {
  using namespace specserve;
  rpc::GrpcServer::BlockTerminationSignals();
  CliArgs args("usage: specserve-draft --model DRAFT.gguf [--listen HOST:PORT] [flags]\n"
               "Serves draft proposal sessions for the speculative decoding coordinator.");
  rpc::DeclareServiceFlags(args, "0.0.0.0:50053", 9103);
  if (int rc = rpc::ParseServiceArgs(args, argc, argv, "specserve-draft"); rc >= 0) return rc;
  absl::StatusOr<rpc::ServiceFlags> flags = rpc::ReadServiceFlags(args);
  if (!flags.ok()) return std::fprintf(stderr, "specserve-draft: %s\n", flags.status().ToString().c_str()), 2;

  absl::StatusOr<std::unique_ptr<rpc::MetricsServer>> metrics = rpc::MetricsServer::Start(flags->metrics_port);
  if (!metrics.ok()) return std::fprintf(stderr, "specserve-draft: %s\n", metrics.status().ToString().c_str()), 1;
  rpc::ServiceMetrics service_metrics((*metrics)->registry(), "draft");

  // Serve health (NOT_SERVING) while the model loads.
  DraftServer service;
  auto server = rpc::GrpcServer::Start(flags->server, {&service});
  if (!server.ok()) return std::fprintf(stderr, "specserve-draft: %s\n", server.status().ToString().c_str()), 1;
  auto host = rpc::ModelHost::Load(*flags);
  if (!host.ok()) return std::fprintf(stderr, "specserve-draft: %s\n", host.status().ToString().c_str()), 1;
  service.SetInfo((*host)->info);
  service.Attach(host->get(), &service_metrics, flags->max_sessions);
  (*server)->SetServing(true);
  std::fprintf(stderr, "specserve-draft: %s on %s, listening on port %d, metrics port %d\n",
               (*host)->info.name().c_str(), (*host)->info.backend().c_str(), (*server)->port(),
               (*metrics)->port());

  const int sig = rpc::GrpcServer::WaitForSignal();
  std::fprintf(stderr, "specserve-draft: signal %d, draining\n", sig);
  (*server)->Drain([&] { service.StartDraining(); }, [&] { return service.active(); });
  service.Stop();
  return 0;
}
