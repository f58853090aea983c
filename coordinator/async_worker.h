// One background thread that runs tasks in the order they were started: the
// draft's look-ahead while the target verifies, and the verdicts a remote
// drafter hears during plain rounds (docs/round_protocol.md "Overlap").
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace specserve {

class AsyncWorker {
 public:
  AsyncWorker() : thread_([this] { Loop(); }) {}
  // Runs what was started, then stops.
  ~AsyncWorker() {
    Wait();
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  AsyncWorker(const AsyncWorker&) = delete;
  AsyncWorker& operator=(const AsyncWorker&) = delete;

  // Queues `task` behind the ones not yet done.
  void Start(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
      ++pending_;
    }
    cv_.notify_all();
  }
  // Blocks until every task started so far is done.
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return pending_ == 0; });
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, nothing left
      auto task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
      --pending_;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  int pending_ = 0;  // started, not finished
  bool stop_ = false;
  std::thread thread_;  // last: starts after the fields above exist
};

}  // namespace specserve
