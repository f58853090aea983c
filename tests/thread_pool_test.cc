// Unit tests for common/thread_pool.h: ParallelFor covers [0, n) exactly once
// in contiguous chunks of at least `grain`, over 1 and several threads, run
// after run, and separate pools work side by side.
#include "common/thread_pool.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace specserve {
namespace {

// Records each fn(begin, end) call and how often every index was covered.
struct Recorder {
  explicit Recorder(int64_t n) : hits(n) {
    for (auto& h : hits) h.store(0);
  }
  std::function<void(int64_t, int64_t)> Fn() {
    return [this](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
      std::lock_guard<std::mutex> lock(mu);
      chunks.emplace_back(b, e);
      threads.insert(std::this_thread::get_id());
    };
  }
  std::vector<std::atomic<int>> hits;
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  std::set<std::thread::id> threads;
};

// Runs one ParallelFor and checks the coverage and chunk shape.
void CheckCoverage(ThreadPool& pool, int64_t n, int64_t grain) {
  SCOPED_TRACE(testing::Message() << "threads=" << pool.size() << " n=" << n << " grain=" << grain);
  Recorder rec(n);
  pool.ParallelFor(n, grain, rec.Fn());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(rec.hits[i].load(), 1) << "index " << i;
  ASSERT_GE(rec.chunks.size(), 1u);
  EXPECT_LE(rec.chunks.size(), static_cast<size_t>(pool.size()));
  for (const auto& [b, e] : rec.chunks) {
    EXPECT_LT(b, e);
    // Chunks are at least `grain` long, unless all of [0, n) is one chunk.
    if (rec.chunks.size() > 1) {
      EXPECT_GE(e - b, grain);
    }
  }
}

TEST(ThreadPool, SizeCountsTheCallingThread) {
  EXPECT_EQ(ThreadPool(1).size(), 1);
  EXPECT_EQ(ThreadPool(4).size(), 4);
  EXPECT_EQ(ThreadPool(0).size(), 1);  // at least the caller
}

TEST(ThreadPool, OneThreadRunsInlineAsOneChunk) {
  ThreadPool pool(1);
  Recorder rec(100);
  pool.ParallelFor(100, 1, rec.Fn());
  ASSERT_EQ(rec.chunks.size(), 1u);
  EXPECT_EQ(rec.chunks[0], std::make_pair(int64_t{0}, int64_t{100}));
  EXPECT_EQ(rec.threads, std::set<std::thread::id>{std::this_thread::get_id()});
}

TEST(ThreadPool, EmptyRangeCallsNothing) {
  ThreadPool pool(4);
  int calls = 0;
  pool.ParallelFor(0, 1, [&](int64_t, int64_t) { ++calls; });
  pool.ParallelFor(-5, 1, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(ThreadPool, EveryIndexRunsExactlyOnce) {
  for (int threads : {1, 2, 3, 4, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 3, 7, 8, 100, 1001}) {
      for (int64_t grain : {0, 1, 3, 16, 5000}) CheckCoverage(pool, n, grain);
    }
  }
}

TEST(ThreadPool, WorkIsSplitOverAllThreads) {
  ThreadPool pool(4);
  Recorder rec(4000);
  // Each chunk waits long enough that no one thread could take two.
  pool.ParallelFor(4000, 1, [&](int64_t b, int64_t e) {
    rec.Fn()(b, e);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  });
  EXPECT_EQ(rec.chunks.size(), 4u);
  EXPECT_EQ(rec.threads.size(), 4u);
  EXPECT_TRUE(rec.threads.count(std::this_thread::get_id()));  // the caller works too
}

TEST(ThreadPool, GrainLimitsTheNumberOfChunks) {
  ThreadPool pool(8);
  Recorder rec(100);
  pool.ParallelFor(100, 40, rec.Fn());  // room for two chunks of >= 40
  EXPECT_EQ(rec.chunks.size(), 2u);
  Recorder small(10);
  pool.ParallelFor(10, 64, small.Fn());  // less than one grain: inline
  ASSERT_EQ(small.chunks.size(), 1u);
  EXPECT_EQ(small.threads, std::set<std::thread::id>{std::this_thread::get_id()});
}

TEST(ThreadPool, RepeatedRunsBackToBack) {
  // Workers spin between runs: keep the count modest for small CI machines.
  ThreadPool pool(3);
  std::vector<int64_t> v(257);
  for (int run = 0; run < 500; ++run) {
    pool.ParallelFor(static_cast<int64_t>(v.size()), 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) v[i] += i;
    });
  }
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], 500 * static_cast<int64_t>(i)) << i;
}

TEST(ThreadPool, RunsAfterWorkersWentToSleep) {
  ThreadPool pool(3);
  for (int run = 0; run < 5; ++run) {
    // Long enough for the workers to stop spinning and wait on the condvar.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CheckCoverage(pool, 999, 1);
  }
}

TEST(ThreadPool, SeparatePoolsRunConcurrently) {
  constexpr int kPools = 2, kRuns = 200;
  std::vector<std::unique_ptr<ThreadPool>> pools;
  for (int p = 0; p < kPools; ++p) pools.push_back(std::make_unique<ThreadPool>(2));
  std::vector<std::atomic<int64_t>> sums(kPools);
  for (auto& s : sums) s.store(0);
  std::vector<std::thread> callers;
  for (int p = 0; p < kPools; ++p) {
    callers.emplace_back([&, p] {
      for (int run = 0; run < kRuns; ++run) {
        pools[p]->ParallelFor(100, 1, [&](int64_t b, int64_t e) {
          int64_t s = 0;
          for (int64_t i = b; i < e; ++i) s += i;
          sums[p].fetch_add(s);
        });
      }
    });
  }
  for (auto& t : callers) t.join();
  for (int p = 0; p < kPools; ++p) EXPECT_EQ(sums[p].load(), kRuns * 4950) << "pool " << p;
}

TEST(ThreadPool, NestedLoopOnAnotherPool) {
  // ParallelFor is not re-entrant on one pool; a chunk may use its own pool.
  ThreadPool outer(4);
  std::vector<std::unique_ptr<ThreadPool>> inner;
  for (int i = 0; i < 4; ++i) inner.push_back(std::make_unique<ThreadPool>(2));
  std::vector<std::atomic<int>> hits(4 * 50);
  for (auto& h : hits) h.store(0);
  outer.ParallelFor(4, 1, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      inner[o]->ParallelFor(50, 1, [&](int64_t ib, int64_t ie) {
        for (int64_t i = ib; i < ie; ++i) hits[o * 50 + i].fetch_add(1);
      });
    }
  });
  for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].load(), 1) << i;
}

TEST(ThreadPool, ConstructAndDestroyManyPools) {
  for (int i = 0; i < 50; ++i) {
    ThreadPool pool(4);
    if (i % 2 == 0) CheckCoverage(pool, 64, 1);  // half of them never used
  }
}

}  // namespace
}  // namespace specserve
