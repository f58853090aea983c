// Plain rounds (K = 0) with a remote drafter and overlap on
// (coordinator/round_loop.cc, HearVerdictAside): the drafter hears every
// verdict in order on the loop's worker, and the rounds do not wait for it:
// a draft service slow to acknowledge verdicts cannot slow plain decoding.
// The roles here are small fakes because the point is the loop's waiting,
// which the real services cannot hold still on cue; the real processes run
// the same rounds in tests/e2e_round_loop_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <vector>

#include "coordinator/k_policy.h"
#include "coordinator/round_loop.h"

namespace specserve {
namespace {

using namespace std::chrono_literals;

// A remote model drafter that holds one of its calls until Release(); the
// two drafters below say which.
class HeldRemoteDrafter : public Drafter {
 public:
  v1::Drafter kind() const override { return v1::DRAFTER_MODEL; }
  bool remote() const override { return true; }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    released_cv_.notify_all();
  }

 protected:
  // Waits, holding `lock` on mu_, until Release().
  void WaitReleased(std::unique_lock<std::mutex>& lock) {
    released_cv_.wait(lock, [&] { return released_; });
  }
  std::mutex mu_;
  std::condition_variable released_cv_;
  bool released_ = false;
};

// A remote drafter whose verdict acknowledgements (K = 0) are held until
// released; it proposes K tokens at once.
class HeldDrafter final : public HeldRemoteDrafter {
 public:
  absl::Status Open(const SessionSpec&) override { return absl::OkStatus(); }
  absl::StatusOr<Proposal> Propose(int64_t round, const std::optional<RoundResult>& last, int32_t k) override {
    std::unique_lock<std::mutex> lock(mu_);
    heard_.push_back({round, last ? last->next_token : -1});
    if (k > 0) return Proposal{std::vector<TokenId>(k, 7)};
    WaitReleased(lock);
    return Proposal{};
  }
  void Close() override {}

  std::vector<std::pair<int64_t, TokenId>> heard() {
    std::lock_guard<std::mutex> lock(mu_);
    return heard_;
  }

 private:
  std::vector<std::pair<int64_t, TokenId>> heard_;  // (round, the verdict's next token)
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

TEST(RoundLoopAside, PlainRoundsGoOnWhileTheDrafterIsSlowToHearVerdicts) {
  constexpr int kTokens = 20;
  const SessionSpec spec = SpecOf(kTokens);
  HeldDrafter drafter;
  CountingVerifier verifier;
  // One speculative round (the drafter opens), then plain rounds.
  std::vector<int32_t> script(kTokens, 0);
  script[0] = 1;
  std::vector<TokenId> out;
  LoopOptions opts = Collecting(KPolicy::Scripted(script), &out);
  auto run = std::async(std::launch::async, [&] { return RunSpeculative(spec, &drafter, verifier, opts); });
  // Every round is verified while the drafter has not answered the first
  // verdict (before, each round waited for the drafter's answer).
  const bool all_rounds = verifier.WaitForRounds(kTokens, 60s);
  drafter.Release();
  absl::StatusOr<LoopStats> stats = run.get();
  ASSERT_TRUE(all_rounds) << "the rounds waited for the drafter";
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->fallbacks, 0);
  EXPECT_EQ(out, Committed(kTokens));
  // It heard every verdict, in order: round r carries round r - 1's token.
  const std::vector<std::pair<int64_t, TokenId>> heard = drafter.heard();
  ASSERT_EQ(heard.size(), static_cast<size_t>(kTokens));
  for (int r = 0; r < kTokens; ++r) {
    EXPECT_EQ(heard[r].first, r);
    EXPECT_EQ(heard[r].second, r == 0 ? -1 : 100 + r - 1) << "round " << r;
  }
}

// Records what the loop asks of it; proposes K copies of token 7.
class RecordingDrafter final : public Drafter {
 public:
  absl::Status Open(const SessionSpec& spec) override {
    opened.push_back(spec);
    return absl::OkStatus();
  }
  absl::StatusOr<Proposal> Propose(int64_t round, const std::optional<RoundResult>&, int32_t k) override {
    rounds.push_back({round, k});
    return Proposal{std::vector<TokenId>(k, 7)};
  }
  void Close() override { ++closed; }
  v1::Drafter kind() const override { return v1::DRAFTER_MODEL; }
  bool remote() const override { return true; }

  std::vector<SessionSpec> opened;
  std::vector<std::pair<int64_t, int32_t>> rounds;  // (round, k) per proposal
  int closed = 0;
};


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
  EXPECT_TRUE(drafter.opened.empty());
  EXPECT_TRUE(drafter.rounds.empty());
  EXPECT_EQ(drafter.closed, 0);
  EXPECT_EQ(stats->fallbacks, 0);
}

TEST(RoundLoopLateOpen, TheDrafterOpensAtTheCommittedSequenceWhenKRises) {
  RecordingDrafter drafter;
  CountingVerifier verifier;
  std::vector<TokenId> out;
  // Rounds 0 and 1 plain (tokens 100, 101), round 2 drafts 2, then cycling.
  LoopOptions opts = Collecting(KPolicy::Scripted({0, 0, 2, 0}), &out);
  // Without the loop's worker the drafter opens in the round that drafts
  // (with it, the open runs aside: the next test).
  opts.overlap = false;
  absl::StatusOr<LoopStats> stats = RunSpeculative(SpecOf(12), &drafter, verifier, opts);
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(drafter.opened.size(), 1u);
  EXPECT_EQ(drafter.opened[0].prompt, (std::vector<TokenId>{1, 2, 3, 100, 101}));
  EXPECT_EQ(drafter.opened[0].max_new_tokens, 10);
  ASSERT_FALSE(drafter.rounds.empty());
  EXPECT_EQ(drafter.rounds[0], (std::pair<int64_t, int32_t>{0, 2}));  // its rounds count from 0
  EXPECT_EQ(drafter.closed, 1);
  EXPECT_EQ(stats->fallbacks, 0);
  EXPECT_EQ(out.size(), 12u);
}

// A remote drafter whose Open (the draft service's prefill) is held until
// released; records every proposal asked of it.
class SlowOpenDrafter final : public HeldRemoteDrafter {
 public:
  absl::Status Open(const SessionSpec& spec) override {
    std::unique_lock<std::mutex> lock(mu_);
    opened_.push_back(spec);
    WaitReleased(lock);
    return absl::OkStatus();
  }
  absl::StatusOr<Proposal> Propose(int64_t round, const std::optional<RoundResult>& last, int32_t k) override {
    std::lock_guard<std::mutex> lock(mu_);
    heard_.push_back({round, k, last ? last->next_token : -1});
    released_cv_.notify_all();
    return Proposal{std::vector<TokenId>(k, 7)};
  }
  void Close() override { ++closed; }

  struct Heard {
    int64_t round;
    int32_t k;
    TokenId last;  // the verdict's next token, -1 for none
  };
  std::vector<SessionSpec> opened() {
    std::lock_guard<std::mutex> lock(mu_);
    return opened_;
  }
  std::vector<Heard> heard() {
    std::lock_guard<std::mutex> lock(mu_);
    return heard_;
  }
  // Blocks (up to 10 s) until the open was let go and a proposal was asked
  // after it, i.e. the loop's worker has finished the open.
  void WaitUntilOpened() {
    std::unique_lock<std::mutex> lock(mu_);
    released_cv_.wait_for(lock, std::chrono::seconds(10), [&] { return released_ && !heard_.empty(); });
  }
  int closed = 0;

 private:
  std::vector<SessionSpec> opened_;
  std::vector<Heard> heard_;
};

// With the loop's worker, a late open runs there: the rounds stay plain
// while the draft service prefills (they would otherwise wait for it: the
// p99 inter-token latency under load), the drafter hears their verdicts in
// order behind the open, and drafting starts once it is done.
TEST(RoundLoopLateOpen, ALateOpenRunsAsideWhileTheRoundsGoOnPlain) {
  constexpr int kTokens = 40;
  const SessionSpec spec = SpecOf(kTokens);
  SlowOpenDrafter drafter;
  CountingVerifier verifier;
  std::vector<TokenId> out;
  // Round 0 plain (token 100); K = 2 asked for from round 1 on.
  std::vector<int32_t> script(kTokens, 2);
  script[0] = 0;
  LoopOptions opts = Collecting(KPolicy::Scripted(script), &out);
  // From round 8 on the loop waits for the open to finish, so that rounds
  // are left to draft (it would otherwise run all 40 plain at once).
  int verified = 0;
  verifier.before_verify = [&] {
    if (++verified > 8) drafter.WaitUntilOpened();
  };
  auto run = std::async(std::launch::async, [&] { return RunSpeculative(spec, &drafter, verifier, opts); });
  // Rounds 1..7 are verified while the open is held (before, round 1 waited
  // for it).
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
  // Its rounds count from 0 and follow the loop's rounds 1, 2, ...: each
  // hears the verdict before it (the loop's round r commits 100 + r). The
  // first ones, heard while the open ran, draft nothing; then it drafts
  // (fewer near the end: a round drafts at most the budget left less one).
  const std::vector<SlowOpenDrafter::Heard> heard = drafter.heard();
  ASSERT_EQ(heard.size(), static_cast<size_t>(kTokens - 1));
  EXPECT_GE(std::count_if(heard.begin(), heard.end(), [](const auto& h) { return h.k == 0; }), 7 + 1);
  EXPECT_EQ(heard[heard.size() - 3].k, 2);
  bool drafting = false;
  for (size_t j = 0; j < heard.size(); ++j) {
    EXPECT_EQ(heard[j].round, static_cast<int64_t>(j));
    EXPECT_EQ(heard[j].last, j == 0 ? -1 : 100 + static_cast<TokenId>(j)) << "drafter round " << j;
    if (heard[j].k > 0) drafting = true;
    const int64_t left = kTokens - 1 - static_cast<int64_t>(j);  // the budget of the loop's round j + 1
    if (drafting) EXPECT_EQ(heard[j].k, std::min<int64_t>(2, left - 1)) << "not drafting after it began, round " << j;
  }
  EXPECT_EQ(drafter.closed, 1);
}

}  // namespace
}  // namespace specserve
