// The n choices of one HTTP request, each run as a gRPC request is
// (GenerationService::Enqueue, Spawn, Context, RunGeneration on its own worker
// thread), their events merged into one queue the HTTP handler thread reads.
// Admission is all or nothing: the request waits in the coordinator's queue
// until n run slots are free together, or is refused with none started. Cancel (or the last reference going away) cancels every choice's
// CancelGroup, which ends both service sessions of each.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/generation_service.h"
#include "coordinator/remote_engines.h"
#include "coordinator/request_log.h"
#include "specserve/v1/generation.pb.h"

namespace specserve {

struct ChoiceEvent {
  enum class Kind { kDelta, kFinal, kError };
  int index = 0;
  Kind kind = Kind::kDelta;
  v1::Delta delta;      // kDelta
  v1::Final final;      // kFinal
  absl::Status error;   // kError: how the choice failed
};

class ChoiceRuns {
 public:
  // Blocks while the request waits for its slots; RESOURCE_EXHAUSTED /
  // UNAVAILABLE from admission, with nothing started.
  // Every choice carries `ids` (by default the HTTP thread's request).
  static absl::StatusOr<std::shared_ptr<ChoiceRuns>> Start(GenerationService* svc,
                                                           std::vector<v1::GenerateRequest> requests,
                                                           ThreadRequestIds ids = ThreadRequest());
  ~ChoiceRuns() { Cancel(); }

  enum class Next { kEvent, kTimeout, kEnd };
  // The next event in arrival order; kEnd once every choice's final or error
  // has been taken.
  Next Wait(ChoiceEvent* ev, std::chrono::milliseconds timeout);
  void Cancel();

 private:
  // What the workers share; it outlives this object until they return.
  struct Shared {
    absl::Mutex mu;
    absl::CondVar cv;
    std::deque<ChoiceEvent> events ABSL_GUARDED_BY(mu);
    // Filled before the workers start, then only read.
    std::vector<std::shared_ptr<CancelGroup>> cancels;
    void Push(ChoiceEvent ev) ABSL_LOCKS_EXCLUDED(mu);
  };
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  int left_ = 0;  // choices whose last event has not been taken
};

}  // namespace specserve
