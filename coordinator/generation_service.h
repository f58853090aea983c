// The public Generation service (proto/specserve/v1/generation.proto).
// Callback API: each call's reactor admits or refuses at once and hands the
// request to its own worker thread (RunGeneration blocks on the services'
// streams; gRPC's callback threads must never block). The reactor forwards
// the client's cancellation to the request's CancelGroup, which cancels both
// service sessions; deadlines travel with the session contexts.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>

#include <grpcpp/grpcpp.h>

#include "coordinator/coordinator_metrics.h"
#include "coordinator/request_runner.h"
#include "coordinator/upstreams.h"
#include "specserve/v1/generation.grpc.pb.h"

namespace specserve {

class GenerationService final : public v1::Generation::CallbackService {
 public:
  GenerationService(CoordinatorMetrics* metrics, CoordinatorOptions opts, int max_requests)
      : metrics_(metrics), opts_(opts), max_requests_(max_requests) {}
  // The target answered: start serving (calls before this get UNAVAILABLE).
  void Attach(Upstreams* upstreams) { upstreams_.store(upstreams); }
  ~GenerationService() override { WaitIdle(); }

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(grpc::CallbackServerContext* ctx,
                                                           const v1::GenerateRequest* req) override;
  grpc::ServerUnaryReactor* GenerateUnary(grpc::CallbackServerContext* ctx, const v1::GenerateRequest* req,
                                          v1::GenerateUnaryResponse* resp) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* ctx, const v1::GetModelInfoRequest* req,
                                         v1::GetModelInfoResponse* resp) override;

  void StartDraining() { draining_.store(true); }
  bool draining() const { return draining_.load(); }
  int active() const;
  void WaitIdle();

  // For the calls' reactors (generation_service.cc).
  // Takes a request slot: RESOURCE_EXHAUSTED at the limit, UNAVAILABLE while draining.
  grpc::Status Admit();
  // Gives back a slot Admit took for work that will not be spawned.
  void Release();
  // Runs the request on a new thread; the work ends with EndRequest.
  void Spawn(std::function<void()> work);
  // Counts the request's outcome and frees its slot. Called once by the
  // spawned work before it answers the client, so that a client which
  // retries as soon as it hears the end finds the slot free.
  void EndRequest(const grpc::Status& s);
  void CountRequest(const grpc::Status& s);
  // A request's context (on_delta left to the call).
  RequestContext Context(CancelGroup* cancel, std::chrono::system_clock::time_point deadline,
                         std::chrono::steady_clock::time_point arrived);
  Upstreams* upstreams() { return upstreams_.load(); }
  CoordinatorMetrics* metrics() { return metrics_; }
  const CoordinatorOptions& options() const { return opts_; }

 private:
  std::atomic<Upstreams*> upstreams_{nullptr};
  CoordinatorMetrics* metrics_;
  CoordinatorOptions opts_;
  const int max_requests_;
  std::atomic<bool> draining_{false};
  mutable std::mutex mu_;
  std::condition_variable idle_;
  int active_ = 0;  // admitted requests whose worker has not finished
};

}  // namespace specserve
