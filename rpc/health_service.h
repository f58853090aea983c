// grpc.health.v1 for every specserve server: one status for the whole server
// (the service name ""), answered by Check and streamed by Watch.
//
// It replaces gRPC's default health service, which answers SERVING from the
// moment the server starts until it is told otherwise: a probe (or a test
// harness) that asked in that moment let clients in before the model or the
// upstreams were ready. This one is NOT_SERVING from its first answer until
// Set(true).
#pragma once

#include <set>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace specserve::rpc {

class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  using Response = grpc::health::v1::HealthCheckResponse;

  HealthService() = default;
  HealthService(const HealthService&) = delete;
  HealthService& operator=(const HealthService&) = delete;
  // Call Shutdown() and stop the server first.
  ~HealthService() override = default;

  // Thread-safe; every Watch stream hears the change.
  void Set(bool serving) ABSL_LOCKS_EXCLUDED(mu_);
  // NOT_SERVING for good, and every Watch stream ends (OK): the server's
  // shutdown does not wait for them.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // "" is the server; any other name is NOT_FOUND, as gRPC's default says.
  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* ctx, const grpc::health::v1::HealthCheckRequest* req,
                                  Response* resp) override;
  grpc::ServerWriteReactor<Response>* Watch(grpc::CallbackServerContext* ctx,
                                            const grpc::health::v1::HealthCheckRequest* req) override;

 private:
  class Watcher;
  Response::ServingStatus StatusLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Also guards every Watcher's state.
  absl::Mutex mu_;
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  std::set<Watcher*> watchers_ ABSL_GUARDED_BY(mu_);  // each removes itself when its call is done
};

}  // namespace specserve::rpc
