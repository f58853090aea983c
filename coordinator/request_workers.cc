#include "coordinator/request_workers.h"

#include <utility>

namespace specserve {

RequestWorkers::~RequestWorkers() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    threads = std::move(threads_);
  }
  for (std::thread& t : threads) t.join();
}

void RequestWorkers::Run(std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  work_.push_back(std::move(work));
  // A thread that is idle now takes it (the queued work outnumbers the idle
  // threads only while they are waking up); otherwise start one if allowed.
  if (static_cast<int>(work_.size()) > idle_ && static_cast<int>(threads_.size()) < max_threads_) {
    threads_.emplace_back([this] { Loop(); });
  }
}

int RequestWorkers::threads() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(threads_.size());
}

int RequestWorkers::idle_threads() const {
  absl::MutexLock lock(&mu_);
  return idle_;
}

void RequestWorkers::Loop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    ++idle_;
    mu_.Await(absl::Condition(
        +[](RequestWorkers* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) { return w->stop_ || !w->work_.empty(); }, this));
    --idle_;
    if (work_.empty()) return;  // stopping, nothing left to run
    std::function<void()> work = std::move(work_.front());
    work_.pop_front();
    mu_.Unlock();
    work();
    work = nullptr;  // its captures go before the lock is taken again
    mu_.Lock();
  }
}

}  // namespace specserve
