// The hand-off from gRPC callback threads to a service's scheduler thread:
// Push never blocks beyond a short mutex; the scheduler takes everything
// queued at once (so whatever arrived during a forward pass joins the next
// batch) and sleeps only when it has nothing else to do.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <utility>

namespace specserve::rpc {

template <class T>
class WorkQueue {
 public:
  void Push(T item) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      items_.push_back(std::move(item));
    }
    cv_.notify_one();
  }

  // Moves every queued item into *out (appending). With `wait`, blocks until
  // there is at least one or `timeout` passes. Returns false once Stop()ped
  // and empty.
  template <class Rep, class Period>
  bool TakeAll(std::deque<T>* out, bool wait, std::chrono::duration<Rep, Period> timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (wait) cv_.wait_for(lock, timeout, [&] { return !items_.empty() || stopped_; });
    for (T& item : items_) out->push_back(std::move(item));
    items_.clear();
    return !(stopped_ && out->empty());
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> items_;
  bool stopped_ = false;
};

}  // namespace specserve::rpc
