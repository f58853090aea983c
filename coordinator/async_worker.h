// One background thread that runs tasks in the order they were started: the
// draft's look-ahead while the target verifies, and the verdicts a remote
// drafter hears during plain rounds (docs/round_protocol.md "Overlap").
#pragma once

#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace specserve {

class AsyncWorker {
 public:
  AsyncWorker() : thread_([this] { Loop(); }) {}
  // Runs what was started, then stops.
  ~AsyncWorker() {
    Wait();
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    cv_.SignalAll();
    thread_.join();
  }
  AsyncWorker(const AsyncWorker&) = delete;
  AsyncWorker& operator=(const AsyncWorker&) = delete;

  // Queues `task` behind the ones not yet done.
  void Start(std::function<void()> task) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      tasks_.push_back(std::move(task));
      ++pending_;
    }
    cv_.SignalAll();
  }
  // Blocks until every task started so far is done.
  void Wait() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    while (pending_ != 0) cv_.Wait(&mu_);
  }

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_) {
    mu_.Lock();
    while (true) {
      while (!stop_ && tasks_.empty()) cv_.Wait(&mu_);
      if (tasks_.empty()) break;  // stopping, nothing left
      auto task = std::move(tasks_.front());
      tasks_.pop_front();
      mu_.Unlock();
      task();
      mu_.Lock();
      --pending_;
      cv_.SignalAll();
    }
    mu_.Unlock();
  }

  absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  int pending_ ABSL_GUARDED_BY(mu_) = 0;  // started, not finished
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts after the fields above exist
};

}  // namespace specserve
