// specserve-target: serves the target model's verify passes over gRPC
// (specserve.v1.TargetService), with health, reflection and /metrics.
#include <cstdio>

#include "rpc/metrics_server.h"
#include "rpc/model_host.h"
#include "rpc/server_runner.h"
#include "target_service/target_server.h"

int main(int argc, char** argv) {
  using namespace specserve;
  rpc::GrpcServer::BlockTerminationSignals();
  CliArgs args("usage: specserve-target --model TARGET.gguf [--listen HOST:PORT] [flags]\n"
               "Serves verification sessions for the speculative decoding coordinator.");
  rpc::DeclareServiceFlags(args, "0.0.0.0:50052", 9102);
  if (int rc = rpc::ParseServiceArgs(args, argc, argv, "specserve-target"); rc >= 0) return rc;
  absl::StatusOr<rpc::ServiceFlags> flags = rpc::ReadServiceFlags(args);
  if (!flags.ok()) return std::fprintf(stderr, "specserve-target: %s\n", flags.status().ToString().c_str()), 2;

  absl::StatusOr<std::unique_ptr<rpc::MetricsServer>> metrics = rpc::MetricsServer::Start(flags->metrics_port);
  if (!metrics.ok()) return std::fprintf(stderr, "specserve-target: %s\n", metrics.status().ToString().c_str()), 1;
  rpc::ServiceMetrics service_metrics((*metrics)->registry(), "target");

  // Serve health (NOT_SERVING) while the model loads.
  TargetServer service;
  auto server = rpc::GrpcServer::Start(flags->server, {&service});
  if (!server.ok()) return std::fprintf(stderr, "specserve-target: %s\n", server.status().ToString().c_str()), 1;
  auto host = rpc::ModelHost::Load(*flags);
  if (!host.ok()) return std::fprintf(stderr, "specserve-target: %s\n", host.status().ToString().c_str()), 1;
  service.SetInfo((*host)->info);
  service.Attach(host->get(), &service_metrics, flags->max_sessions);
  (*server)->SetServing(true);
  std::fprintf(stderr, "specserve-target: %s on %s, listening on port %d, metrics port %d\n",
               (*host)->info.name().c_str(), (*host)->info.backend().c_str(), (*server)->port(),
               (*metrics)->port());

  const int sig = rpc::GrpcServer::WaitForSignal();
  std::fprintf(stderr, "specserve-target: signal %d, draining\n", sig);
  (*server)->Drain([&] { service.StartDraining(); }, [&] { return service.active(); });
  service.Stop();
  return 0;
}
