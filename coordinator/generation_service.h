// The public Generation service (proto/specserve/v1/generation.proto).
// Callback API: each call's reactor puts the request in the coordinator's
// queue (coordinator/request_queue.h: a run slot now, or a wait in arrival
// order until one frees or the request's deadline or --queue-timeout-s
// passes) and, once it may run, hands it to a worker thread
// (coordinator/request_workers.h: RunGeneration blocks on the services'
// streams; gRPC's callback threads must never block). The reactor forwards the client's cancellation to the
// queue and to the request's CancelGroup, which cancels both service
// sessions; deadlines travel with the session contexts.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

#include <grpcpp/grpcpp.h>

#include "coordinator/coordinator_metrics.h"
#include "coordinator/request_queue.h"
#include "coordinator/request_runner.h"
#include "coordinator/request_workers.h"
#include "coordinator/upstreams.h"
#include "specserve/v1/generation.grpc.pb.h"

namespace specserve {

class GenerationService final : public v1::Generation::CallbackService {
 public:
  // `queue` sizes the run slots and the waiting line; its on_waiting is set
  // here (specserve_requests_waiting counts queued requests too).
  GenerationService(CoordinatorMetrics* metrics, CoordinatorOptions opts, RequestQueue::Options queue);
  // The target answered: start serving (calls before this get UNAVAILABLE).
  void Attach(Upstreams* upstreams) { upstreams_.store(upstreams); }
  ~GenerationService() override { WaitIdle(); }

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(grpc::CallbackServerContext* ctx,
                                                           const v1::GenerateRequest* req) override;
  grpc::ServerUnaryReactor* GenerateUnary(grpc::CallbackServerContext* ctx, const v1::GenerateRequest* req,
                                          v1::GenerateUnaryResponse* resp) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* ctx, const v1::GetModelInfoRequest* req,
                                         v1::GetModelInfoResponse* resp) override;

  void StartDraining() { queue_.StartDraining(); }
  bool draining() const { return queue_.draining(); }
  int active() const { return queue_.running() + queue_.waiting(); }
  void WaitIdle() { queue_.WaitIdle(); }

  // For the calls' reactors (generation_service.cc) and the HTTP choices
  // (choice_runs.cc).
  // Asks for `slots` run slots before `deadline`: decide(OK) when the work
  // may start (it then ends with EndRequest per slot), else decide(why not:
  // UNAVAILABLE before the target answered or while draining,
  // RESOURCE_EXHAUSTED when the line is full or the wait too long,
  // DEADLINE_EXCEEDED, CANCELLED). Returns the ticket for Dequeue.
  uint64_t Enqueue(int slots, std::chrono::system_clock::time_point deadline, RequestQueue::Decision decide);
  // The caller left: a request still waiting is refused with CANCELLED.
  void Dequeue(uint64_t ticket) { queue_.Cancel(ticket); }
  // Runs the request on a worker thread; the work ends with EndRequest.
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
  RequestQueue queue_;
  // Last: its threads finish their work and are joined first.
  RequestWorkers workers_;
};

}  // namespace specserve
