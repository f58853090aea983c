// The coordinator's admission queue (coordinator/request_queue.h) and the
// waiting line both admission queues share (rpc/wait_queue.h): arrival order,
// deadlines, the line's limit, cancellation and draining; and the threads
// admitted requests run on (coordinator/request_workers.h).
#include "coordinator/request_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/request_workers.h"
#include "rpc/wait_queue.h"

namespace specserve {
namespace {

using namespace std::chrono_literals;
using Clock = RequestQueue::Clock;
constexpr Clock::time_point kNoDeadline = Clock::time_point::max();

// What each request was told, in the order they were told.
struct Outcomes {
  std::mutex mu;
  std::vector<std::pair<std::string, absl::Status>> told;
  std::vector<std::promise<absl::Status>> promises = std::vector<std::promise<absl::Status>>(16);

  RequestQueue::Decision For(const std::string& name, int slot) {
    return [this, name, slot](absl::Status s) {
      {
        std::lock_guard<std::mutex> lock(mu);
        told.emplace_back(name, s);
      }
      promises[slot].set_value(std::move(s));
    };
  }
  std::vector<std::string> Names() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<std::string> out;
    for (auto& [n, s] : told) out.push_back(n + (s.ok() ? "" : ":" + absl::StatusCodeToString(s.code())));
    return out;
  }
};

RequestQueue::Options Opts(int running, int waiting, std::chrono::milliseconds timeout = 60s) {
  RequestQueue::Options o;
  o.max_running = running;
  o.max_waiting = waiting;
  o.timeout = timeout;
  return o;
}

TEST(WaitQueue, AdmitsFromTheFrontExpiresAnywhereAndKeepsItsLimit) {
  rpc::WaitQueue<std::string> q(3);
  const auto t0 = Clock::now();
  q.Push(1, t0 + 10s, "a");
  q.Push(2, t0 + 1s, "b");
  q.Push(3, t0 + 10s, "c");
  EXPECT_TRUE(q.full());
  EXPECT_EQ(*q.NextDeadline(), t0 + 1s);
  ASSERT_NE(q.Find(3), nullptr);
  EXPECT_EQ(*q.Find(3), "c");
  std::vector<std::string> expired;
  q.Expire(t0 + 2s, [&](std::string&& s) { expired.push_back(s); });
  EXPECT_EQ(expired, std::vector<std::string>{"b"});
  EXPECT_FALSE(q.full());
  EXPECT_EQ(*q.Take(3), "c");
  EXPECT_FALSE(q.Take(3).has_value());
  ASSERT_NE(q.Front(), nullptr);
  EXPECT_EQ(q.PopFront(), "a");
  EXPECT_TRUE(q.empty());
  EXPECT_FALSE(q.NextDeadline().has_value());
}

TEST(RequestQueue, AFreeSlotStartsTheRequestBeforeSubmitReturns) {
  RequestQueue q(Opts(2, 4));
  bool started = false;
  q.Submit(1, kNoDeadline, [&](absl::Status s) { started = s.ok(); });
  EXPECT_TRUE(started);
  EXPECT_EQ(q.running(), 1);
  EXPECT_EQ(q.waiting(), 0);
  q.Release(1);
  q.WaitIdle();
}

TEST(RequestQueue, RequestsBeyondTheLimitStartInArrivalOrderAsSlotsFree) {
  RequestQueue q(Opts(1, 8));
  Outcomes out;
  q.Submit(1, kNoDeadline, out.For("a", 0));
  q.Submit(1, kNoDeadline, out.For("b", 1));
  q.Submit(1, kNoDeadline, out.For("c", 2));
  EXPECT_EQ(q.running(), 1);
  EXPECT_EQ(q.waiting(), 2);
  EXPECT_EQ(out.Names(), std::vector<std::string>{"a"});
  q.Release(1);
  EXPECT_EQ(out.Names(), (std::vector<std::string>{"a", "b"}));
  q.Release(1);
  EXPECT_EQ(out.Names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(q.waiting(), 0);
  q.Release(1);
  q.WaitIdle();
}

TEST(RequestQueue, ALargeRequestIsNotOvertakenBySmallOnes) {
  RequestQueue q(Opts(2, 8));
  Outcomes out;
  q.Submit(1, kNoDeadline, out.For("one", 0));
  q.Submit(2, kNoDeadline, out.For("two", 1));   // needs both slots: waits
  q.Submit(1, kNoDeadline, out.For("small", 2));  // would fit, but two came first
  EXPECT_EQ(out.Names(), std::vector<std::string>{"one"});
  EXPECT_EQ(q.waiting(), 2);
  q.Release(1);
  EXPECT_EQ(out.Names(), (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(q.running(), 2);
  q.Release(2);
  EXPECT_EQ(out.Names(), (std::vector<std::string>{"one", "two", "small"}));
  q.Release(1);
  q.WaitIdle();
}

TEST(RequestQueue, AFullLineAndAnImpossibleSizeAreRefusedAtOnce) {
  RequestQueue q(Opts(1, 1));
  Outcomes out;
  q.Submit(1, kNoDeadline, out.For("run", 0));
  q.Submit(1, kNoDeadline, out.For("wait", 1));
  q.Submit(1, kNoDeadline, out.For("full", 2));
  q.Submit(2, kNoDeadline, out.For("big", 3));
  EXPECT_EQ(out.Names(), (std::vector<std::string>{"run", "full:RESOURCE_EXHAUSTED", "big:RESOURCE_EXHAUSTED"}));
  absl::Status full = out.promises[2].get_future().get();
  EXPECT_NE(full.message().find("--max-waiting"), std::string::npos) << full;
  absl::Status big = out.promises[3].get_future().get();
  EXPECT_NE(big.message().find("--max-sessions"), std::string::npos) << big;
  q.Release(1);
  q.Release(1);
  q.WaitIdle();
}

TEST(RequestQueue, AWaitPastTheQueueTimeoutIsResourceExhaustedAndTheOwnDeadlineIsDeadlineExceeded) {
  RequestQueue q(Opts(1, 8, 150ms));
  Outcomes out;
  q.Submit(1, kNoDeadline, out.For("run", 0));
  const auto t0 = Clock::now();
  q.Submit(1, kNoDeadline, out.For("timeout", 1));
  q.Submit(1, Clock::now() + 30ms, out.For("deadline", 2));
  absl::Status deadline = out.promises[2].get_future().get();
  EXPECT_TRUE(absl::IsDeadlineExceeded(deadline)) << deadline;
  absl::Status timeout = out.promises[1].get_future().get();
  EXPECT_TRUE(absl::IsResourceExhausted(timeout)) << timeout;
  EXPECT_NE(timeout.message().find("--queue-timeout-s"), std::string::npos) << timeout;
  EXPECT_GE(Clock::now() - t0, 150ms);
  EXPECT_EQ(q.waiting(), 0);
  EXPECT_EQ(q.running(), 1);  // neither took a slot
  q.Release(1);
  q.WaitIdle();
}

TEST(RequestQueue, ACancelledWaiterLeavesAndLetsTheNextOneIn) {
  RequestQueue q(Opts(2, 8));
  Outcomes out;
  q.Submit(1, kNoDeadline, out.For("run", 0));
  const uint64_t big = q.Submit(2, kNoDeadline, out.For("big", 1));
  q.Submit(1, kNoDeadline, out.For("small", 2));
  EXPECT_EQ(q.waiting(), 2);
  q.Cancel(big);  // the small one behind it fits now
  EXPECT_EQ(out.Names(), (std::vector<std::string>{"run", "big:CANCELLED", "small"}));
  q.Cancel(big);  // twice, or after it started: nothing happens
  EXPECT_EQ(q.running(), 2);
  q.Release(1);
  q.Release(1);
  q.WaitIdle();
}

TEST(RequestQueue, DrainingRefusesWaitersAndNewRequestsButLetsRunningOnesFinish) {
  RequestQueue q(Opts(1, 8));
  Outcomes out;
  q.Submit(1, kNoDeadline, out.For("run", 0));
  q.Submit(1, kNoDeadline, out.For("wait", 1));
  q.StartDraining();
  q.Submit(1, kNoDeadline, out.For("late", 2));
  EXPECT_EQ(out.Names(), (std::vector<std::string>{"run", "wait:UNAVAILABLE", "late:UNAVAILABLE"}));
  EXPECT_TRUE(q.draining());
  EXPECT_EQ(q.running(), 1);
  std::thread release([&] {
    std::this_thread::sleep_for(20ms);
    q.Release(1);
  });
  q.WaitIdle();
  release.join();
}

TEST(RequestQueue, TheWaitingGaugeFollowsTheLineAndEveryDecisionComesOnce) {
  std::atomic<int> gauge{0};
  RequestQueue::Options o = Opts(3, 64, 5s);
  o.on_waiting = [&](int d) { gauge += d; };
  RequestQueue q(o);
  // Many threads submit, cancel and release at once; each request hears
  // exactly one decision and every slot taken is given back.
  std::atomic<int> decisions{0}, started{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 16; ++i) {
    clients.emplace_back([&, i] {
      for (int j = 0; j < 20; ++j) {
        auto done = std::make_shared<std::promise<bool>>();
        const uint64_t t = q.Submit(1 + (i + j) % 2, kNoDeadline, [&, done](absl::Status s) {
          ++decisions;
          if (s.ok()) ++started;
          done->set_value(s.ok());
        });
        if ((i + j) % 5 == 0) q.Cancel(t);
        if (done->get_future().get()) q.Release(1 + (i + j) % 2);
      }
    });
  }
  for (std::thread& c : clients) c.join();
  q.WaitIdle();
  EXPECT_EQ(decisions.load(), 16 * 20);
  EXPECT_GT(started.load(), 0);
  EXPECT_EQ(gauge.load(), 0);
  EXPECT_EQ(q.running(), 0);
}

// At most max_threads threads, reused; work beyond them waits its turn,
// and destruction runs everything handed in before it joins.
TEST(RequestWorkers, BoundedThreadsRunEveryWorkAndJoinOnDestruction) {
  std::atomic<int> done{0}, running{0}, most{0};
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  {
    RequestWorkers workers(2);
    for (int i = 0; i < 5; ++i) {
      workers.Run([&, released] {
        const int now = ++running;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        released.wait();
        --running;
        ++done;
      });
    }
    // Two run (held); three wait for a thread.
    for (int i = 0; i < 200 && running.load() < 2; ++i) std::this_thread::sleep_for(5ms);
    EXPECT_EQ(running.load(), 2);
    EXPECT_EQ(workers.threads(), 2);
    EXPECT_EQ(done.load(), 0);
    release.set_value();
    for (int i = 0; i < 400 && done.load() < 5; ++i) std::this_thread::sleep_for(5ms);
    EXPECT_EQ(done.load(), 5);
    for (int i = 0; i < 400 && workers.idle_threads() < 2; ++i) std::this_thread::sleep_for(5ms);
    // Idle threads are reused, not added.
    workers.Run([&] { ++done; });
    workers.Run([&] { ++done; });
    EXPECT_EQ(workers.threads(), 2);
  }
  EXPECT_EQ(done.load(), 7);  // the last two ran before the pool was gone
  EXPECT_EQ(most.load(), 2);
}

TEST(SteadyDeadline, NoneStaysNoneAndAFiniteOneKeepsItsDistance) {
  EXPECT_EQ(SteadyDeadline(std::chrono::system_clock::time_point::max()), Clock::time_point::max());
  const auto d = SteadyDeadline(std::chrono::system_clock::now() + 2s);
  EXPECT_GT(d, Clock::now() + 1500ms);
  EXPECT_LT(d, Clock::now() + 2500ms);
}

}  // namespace
}  // namespace specserve
