// The threads admitted requests run on. A request blocks its thread on the
// services' streams for its whole life, so it cannot run on gRPC's callback
// threads; the request queue (coordinator/request_queue.h) bounds how many
// run at once, and this pool keeps that many threads at most, started as
// they are first needed and reused after. Destruction runs what was handed
// in and joins every thread, so no request's tail (answering its client
// after its slot was freed) outlives the service.
#pragma once

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace specserve {

class RequestWorkers {
 public:
  // max_threads >= 1: the queue's run slots.
  explicit RequestWorkers(int max_threads) : max_threads_(max_threads < 1 ? 1 : max_threads) {}
  ~RequestWorkers() ABSL_LOCKS_EXCLUDED(mu_);
  RequestWorkers(const RequestWorkers&) = delete;
  RequestWorkers& operator=(const RequestWorkers&) = delete;

  // Runs `work` on an idle thread, on a new one while fewer than
  // max_threads exist, else as soon as a thread is free (in order).
  void Run(std::function<void()> work) ABSL_LOCKS_EXCLUDED(mu_);

  int threads() const ABSL_LOCKS_EXCLUDED(mu_);       // started so far
  int idle_threads() const ABSL_LOCKS_EXCLUDED(mu_);  // waiting for work now

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  const int max_threads_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> work_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;  // threads waiting for work
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace specserve
