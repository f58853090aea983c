// A fixed pool of worker threads for data-parallel loops inside one forward
// pass. A decode step issues ~10 parallel loops per layer, each a few
// microseconds long, so workers spin briefly before sleeping: a condition
// variable wake-up alone costs as much as the work.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace specserve {

class ThreadPool {
 public:
  // n_threads counts the calling thread: 1 runs everything inline.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(begin, end) over [0, n) split into contiguous chunks of at least
  // `grain` items, one chunk per thread; returns when all are done. Not
  // re-entrant: one ParallelFor at a time per pool.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void Worker(int index);
  void RunChunk(int index);

  const int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int chunks_ = 0;
};

}  // namespace specserve
