// What every specserve server does the same way: gRPC health
// (grpc.health.v1, NOT_SERVING until the model is ready), server reflection
// (so grpcurl works), message size caps, and the SIGTERM sequence (health
// NOT_SERVING, refuse new sessions, let running ones finish up to a drain
// timeout, then stop), and optional mutual TLS (rpc/tls.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/cli_args.h"
#include "rpc/health_service.h"
#include "rpc/tls.h"

namespace specserve::rpc {

struct ServerOptions {
  std::string listen = "0.0.0.0:0";         // HOST:PORT; port 0 picks a free one
  int max_message_bytes = 64 << 20;          // both directions
  double drain_seconds = 30;                 // SIGTERM: wait this long for running sessions
  // > 0: each client connection is closed (GOAWAY) after this long, with
  // max_connection_age_grace_seconds for its streams to finish, so clients
  // re-resolve DNS and reach replicas added since they connected. 0: never.
  double max_connection_age_seconds = 0;
  double max_connection_age_grace_seconds = 600;
  TlsConfig tls;                             // enabled: TLS, client certificates required
};

// --max-connection-age-s and --max-connection-age-grace-s, for every server.
void AddConnectionAgeFlags(CliArgs& args);
absl::Status ParseConnectionAgeFlags(const CliArgs& args, ServerOptions* opts);

class GrpcServer {
 public:
  // Call first in main, before any thread exists: blocks SIGTERM and SIGINT
  // in every thread (WaitForSignal takes them synchronously, so no handler
  // runs in an arbitrary thread) and ignores SIGPIPE.
  static void BlockTerminationSignals();
  // Blocks until SIGTERM or SIGINT arrives; returns the signal number.
  static int WaitForSignal();
  // A SIGTERM or SIGINT already pending (taken), or 0; never blocks.
  static int TakePendingSignal();

  // UNAVAILABLE when the address cannot be bound (or, with TLS, the
  // certificate and key are not usable).
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(const ServerOptions& opts,
                                                           const std::vector<grpc::Service*>& services);
  ~GrpcServer();

  // Health for every service; thread-safe. Once Drain has begun, stays
  // NOT_SERVING.
  void SetServing(bool serving) ABSL_LOCKS_EXCLUDED(mu_);
  int port() const { return port_; }

  // The SIGTERM sequence. `refuse_new` makes new sessions fail with
  // UNAVAILABLE; `active` counts the sessions still running. Returns after
  // the server has stopped (calls still running at the deadline are cancelled).
  void Drain(const std::function<void()>& refuse_new, const std::function<int()>& active) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  GrpcServer() = default;
  ServerOptions opts_;
  std::unique_ptr<HealthService> health_;  // outlives server_
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool stopped_ = false;
  absl::Mutex mu_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace specserve::rpc
