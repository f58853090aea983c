// The round loop's commits to the drafter (coordinator/round_loop.cc):
// every verdict, in order, without an answer; plain rounds (K = 0) never
// ask the drafter for a proposal; a late open's prefill is awaited on the
// loop's worker while plain rounds go on. The roles here are small fakes
// because the point is the loop's calls and waits, which the real services
// cannot hold still on cue; the real processes run the same rounds in
// tests/e2e_round_loop_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "coordinator/k_policy.h"
#include "coordinator/round_loop.h"

namespace specserve {
namespace {

using namespace std::chrono_literals;

// What a drafter was told, in order: each commit and each proposal.
struct Heard {
  bool commit;    // a Commit, else a Propose
  int64_t round;
  int32_t value;  // the commit's next token, or the proposal's k
  bool operator==(const Heard& o) const { return commit == o.commit && round == o.round && value == o.value; }
};

// A remote model drafter that records what it hears and proposes K copies
// of token 7. With hold_open, AwaitOpen (the draft service's prefill) is
// held until Release().
class RecordingDrafter final : public Drafter {
 public:
  explicit RecordingDrafter(bool hold_open = false) : held_(hold_open) {}
  absl::Status Open(const SessionSpec& spec) override {
    std::lock_guard<std::mutex> lock(mu_);
    opened_.push_back(spec);
    return absl::OkStatus();
  }
  absl::Status AwaitOpen() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !held_; });
    awaited_ = true;
    cv_.notify_all();
    return absl::OkStatus();
  }
  absl::Status Commit(const Verdict& v) override {
    std::lock_guard<std::mutex> lock(mu_);
    heard_.push_back({true, v.round, v.next_token});
    return absl::OkStatus();
  }
  absl::StatusOr<Proposal> Propose(int64_t round, int32_t k) override {
    std::lock_guard<std::mutex> lock(mu_);
    heard_.push_back({false, round, k});
    cv_.notify_all();
    if (k <= 0) ADD_FAILURE() << "the drafter was asked to propose for a plain round";
    return Proposal{std::vector<TokenId>(k, 7)};
  }
  void Close() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++closed_;
  }
  absl::string_view name() const override { return kModelDrafterName; }
  bool remote() const override { return true; }

  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = false;
    cv_.notify_all();
  }
  // Blocks (up to 10 s) until AwaitOpen has returned.
  void WaitUntilAwaited() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, 10s, [&] { return awaited_; });
  }
  std::vector<SessionSpec> opened() {
    std::lock_guard<std::mutex> lock(mu_);
    return opened_;
  }
  std::vector<Heard> heard() {
    std::lock_guard<std::mutex> lock(mu_);
    return heard_;
  }
  int64_t proposals() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::count_if(heard_.begin(), heard_.end(), [](const Heard& h) { return !h.commit; });
  }
  int closed() {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_;
  bool awaited_ = false;
  std::vector<SessionSpec> opened_;
  std::vector<Heard> heard_;
  int closed_ = 0;
};

// Round r commits token 100 + r; counts the rounds it verified.
class CountingVerifier final : public Verifier {
 public:
  absl::Status Open(const SessionSpec&) override { return absl::OkStatus(); }
  absl::StatusOr<RoundResult> Verify(int64_t round, const Proposal& p) override {
    if (before_verify) before_verify();
    std::lock_guard<std::mutex> lock(mu_);
    ++rounds_;
    cv_.notify_all();
    return RoundResult{round, 0, static_cast<TokenId>(100 + round)};
  }
  void Close() override {}
  bool WaitForRounds(int n, std::chrono::seconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return rounds_ >= n; });
  }
  std::function<void()> before_verify;  // runs on the loop's thread, first thing in each round's Verify

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int rounds_ = 0;
};

// What CountingVerifier commits in `rounds` rounds: 100, 101, ...
// The request every test here runs: prompt {1, 2, 3}, `tokens` new tokens.
SessionSpec SpecOf(int tokens) {
  SessionSpec spec;
  spec.prompt = {1, 2, 3};
  spec.max_new_tokens = tokens;
  return spec;
}

std::vector<TokenId> Committed(int rounds) {
  std::vector<TokenId> ids;
  for (int r = 0; r < rounds; ++r) ids.push_back(100 + r);
  return ids;
}

LoopOptions Collecting(KPolicy k, std::vector<TokenId>* out) {
  LoopOptions opts;
  opts.k = std::move(k);
  opts.overlap = true;
  opts.on_tokens = [out](absl::Span<const TokenId> ids) {
    out->insert(out->end(), ids.begin(), ids.end());
    return true;
  };
  return opts;
}

// The coordinator owns the committed sequence: after every round but the
// last the drafter is told the verdict, in order, and a plain round never
// asks it for anything else.
TEST(RoundLoopCommit, PlainRoundsOnlyCommit) {
  constexpr int kTokens = 20;
  RecordingDrafter drafter;
  CountingVerifier verifier;
  // One speculative round (its proposal is rejected: token 100), then plain.
  std::vector<int32_t> script(kTokens, 0);
  script[0] = 1;
  std::vector<TokenId> out;
  LoopOptions opts = Collecting(KPolicy::Scripted(script), &out);
  absl::StatusOr<LoopStats> stats = RunSpeculative(SpecOf(kTokens), &drafter, verifier, opts);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->fallbacks, 0);
  EXPECT_EQ(out, Committed(kTokens));
  std::vector<Heard> want = {{false, 0, 1}};
  for (int r = 0; r + 1 < kTokens; ++r) want.push_back({true, r, 100 + r});
  EXPECT_EQ(drafter.heard(), want);
  EXPECT_EQ(drafter.closed(), 1);
}

// A request that starts with plain rounds (K = 0: asked for, or adaptive K
// under a saturated target) never troubles the draft service while K stays
// 0, and opens its drafter at the committed sequence when K first rises.
TEST(RoundLoopLateOpen, PlainRequestsNeverOpenTheDrafter) {
  RecordingDrafter drafter;
  CountingVerifier verifier;
  std::vector<TokenId> out;
  LoopOptions opts = Collecting(KPolicy::Fixed(0), &out);
  absl::StatusOr<LoopStats> stats = RunSpeculative(SpecOf(12), &drafter, verifier, opts);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(out.size(), 12u);
  EXPECT_TRUE(drafter.opened().empty());
  EXPECT_TRUE(drafter.heard().empty());
  EXPECT_EQ(drafter.closed(), 0);
  EXPECT_EQ(stats->fallbacks, 0);
}

TEST(RoundLoopLateOpen, TheDrafterOpensAtTheCommittedSequenceWhenKRises) {
  RecordingDrafter drafter;
  CountingVerifier verifier;
  std::vector<TokenId> out;
  // Rounds 0 and 1 plain (tokens 100, 101), round 2 drafts 2, then cycling.
  LoopOptions opts = Collecting(KPolicy::Scripted({0, 0, 2, 0}), &out);
  // Without the loop's worker the drafter opens in the round that drafts
  // (with it, its prefill is awaited aside: the next test).
  opts.overlap = false;
  absl::StatusOr<LoopStats> stats = RunSpeculative(SpecOf(12), &drafter, verifier, opts);
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(drafter.opened().size(), 1u);
  EXPECT_EQ(drafter.opened()[0].prompt, (std::vector<TokenId>{1, 2, 3, 100, 101}));
  EXPECT_EQ(drafter.opened()[0].max_new_tokens, 10);
  const std::vector<Heard> heard = drafter.heard();
  ASSERT_GE(heard.size(), 3u);
  EXPECT_EQ(heard[0], (Heard{false, 0, 2}));  // its rounds count from 0
  EXPECT_EQ(heard[1], (Heard{true, 0, 102}));
  EXPECT_EQ(heard[2], (Heard{true, 1, 103}));  // the plain round after it: a commit only
  EXPECT_EQ(drafter.closed(), 1);
  EXPECT_EQ(stats->fallbacks, 0);
  EXPECT_EQ(out.size(), 12u);
}

// With the loop's worker, a late open's prefill is awaited there: the
// rounds stay plain while the draft service prefills (they would otherwise
// wait for it: the p99 inter-token latency under load), their verdicts are
// committed behind the open, in order, and drafting starts once it is done.
TEST(RoundLoopLateOpen, ALateOpenRunsAsideWhileTheRoundsGoOnPlain) {
  constexpr int kTokens = 40;
  RecordingDrafter drafter(/*hold_open=*/true);
  CountingVerifier verifier;
  std::vector<TokenId> out;
  // Round 0 plain (token 100); K = 2 asked for from round 1 on.
  std::vector<int32_t> script(kTokens, 2);
  script[0] = 0;
  LoopOptions opts = Collecting(KPolicy::Scripted(script), &out);
  // From round 8 on the loop waits for the open to finish, so that rounds
  // are left to draft (it would otherwise run all 40 plain at once).
  int verified = 0;
  // The loop learns that the open is done when its worker clears a flag,
  // just after AwaitOpen returns; a worker descheduled there would leave
  // the remaining rounds plain, so each round waits a little for it until
  // drafting begins.
  verifier.before_verify = [&] {
    if (++verified <= 8) return;
    drafter.WaitUntilAwaited();
    if (drafter.proposals() == 0) std::this_thread::sleep_for(20ms);
  };
  auto run = std::async(std::launch::async, [&] { return RunSpeculative(SpecOf(kTokens), &drafter, verifier, opts); });
  // Rounds 1..7 are verified while the open is held.
  const bool went_on = verifier.WaitForRounds(8, 10s);
  drafter.Release();
  absl::StatusOr<LoopStats> stats = run.get();
  ASSERT_TRUE(went_on) << "the rounds waited for the drafter's open";
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->fallbacks, 0);
  EXPECT_EQ(out, Committed(kTokens));
  // Opened once, at the sequence committed when K rose (after round 0).
  const std::vector<SessionSpec> opened = drafter.opened();
  ASSERT_EQ(opened.size(), 1u);
  EXPECT_EQ(opened[0].prompt, (std::vector<TokenId>{1, 2, 3, 100}));
  EXPECT_EQ(opened[0].max_new_tokens, kTokens - 1);
  // Its rounds count from 0 and follow the loop's rounds 1, 2, ...: drafter
  // round j commits 101 + j. The rounds run while the open was held only
  // commit; every proposal is for the round the next commit carries; once
  // drafting began every round drafts (fewer near the end: a round drafts
  // at most the budget left less one).
  int64_t commits = 0, proposals = 0;
  bool drafting = false, proposed = false;  // ...in the round the next commit carries
  for (const Heard& h : drafter.heard()) {
    if (h.commit) {
      EXPECT_EQ(h.round, commits);
      EXPECT_EQ(h.value, 101 + commits);
      if (drafting) EXPECT_TRUE(proposed) << "a plain round after drafting began, round " << h.round;
      proposed = false;
      ++commits;
    } else {
      EXPECT_FALSE(proposed) << "two proposals in round " << h.round;
      proposed = true;
      EXPECT_EQ(h.round, commits);
      const int64_t left = kTokens - 1 - commits;  // the budget of the loop's round commits + 1
      EXPECT_EQ(h.value, std::min<int64_t>(2, left - 1));
      drafting = true;
      ++proposals;
    }
  }
  EXPECT_EQ(commits, kTokens - 2);  // every round's but the first (unopened) and the last
  EXPECT_GE(commits - proposals, 7);
  EXPECT_GT(proposals, 10);
  EXPECT_EQ(drafter.closed(), 1);
}

}  // namespace
}  // namespace specserve
