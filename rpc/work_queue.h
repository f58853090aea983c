// The hand-off from gRPC callback threads to a service's scheduler thread:
// Push never blocks beyond a short mutex; the scheduler takes everything
// queued at once (so whatever arrived during a forward pass joins the next
// batch) and sleeps only when it has nothing else to do.
#pragma once

#include <chrono>
#include <deque>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace specserve::rpc {

template <class T>
class WorkQueue {
 public:
  void Push(T item) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      items_.push_back(std::move(item));
    }
    cv_.Signal();
  }

  // Moves every queued item into *out (appending). With `wait`, blocks until
  // there is at least one or `timeout` passes. Returns false once Stop()ped
  // and empty.
  template <class Rep, class Period>
  bool TakeAll(std::deque<T>* out, bool wait, std::chrono::duration<Rep, Period> timeout) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (wait) {
      const absl::Time deadline =
          absl::Now() + absl::FromChrono(std::chrono::duration_cast<std::chrono::nanoseconds>(timeout));
      while (items_.empty() && !stopped_) {
        if (cv_.WaitWithDeadline(&mu_, deadline)) break;  // timed out
      }
    }
    for (T& item : items_) out->push_back(std::move(item));
    items_.clear();
    return !(stopped_ && out->empty());
  }

  void Stop() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      stopped_ = true;
    }
    cv_.SignalAll();
  }

 private:
  absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<T> items_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace specserve::rpc
