// Plain rounds (K = 0) with a remote drafter and overlap on
// (coordinator/round_loop.cc, HearVerdictAside): the drafter hears every
// verdict in order on the loop's worker, and the rounds do not wait for it:
// a draft service slow to acknowledge verdicts cannot slow plain decoding.
// The roles here are small fakes because the point is the loop's waiting,
// which the real services cannot hold still on cue; the real processes run
// the same rounds in tests/e2e_round_loop_test.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <vector>

#include "coordinator/k_policy.h"
#include "coordinator/round_loop.h"

namespace specserve {
namespace {

using namespace std::chrono_literals;

// A remote drafter whose verdict acknowledgements are held until released.
class HeldDrafter final : public Drafter {
 public:
  absl::Status Open(const SessionSpec&) override { return absl::OkStatus(); }
  absl::StatusOr<Proposal> Propose(int64_t round, const std::optional<RoundResult>& last, int32_t k) override {
    std::unique_lock<std::mutex> lock(mu_);
    heard_.push_back({round, last ? last->next_token : -1});
    released_cv_.wait(lock, [&] { return released_; });
    if (k != 0) return absl::InternalError("this drafter only hears verdicts");
    return Proposal{};
  }
  void Close() override {}
  v1::Drafter kind() const override { return v1::DRAFTER_MODEL; }
  bool remote() const override { return true; }

  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    released_cv_.notify_all();
  }
  std::vector<std::pair<int64_t, TokenId>> heard() {
    std::lock_guard<std::mutex> lock(mu_);
    return heard_;
  }

 private:
  std::mutex mu_;
  std::condition_variable released_cv_;
  bool released_ = false;
  std::vector<std::pair<int64_t, TokenId>> heard_;  // (round, the verdict's next token)
};

// Round r commits token 100 + r; counts the rounds it verified.
class CountingVerifier final : public Verifier {
 public:
  absl::Status Open(const SessionSpec&) override { return absl::OkStatus(); }
  absl::StatusOr<RoundResult> Verify(int64_t round, const Proposal& p) override {
    EXPECT_TRUE(p.tokens.empty());
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

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int rounds_ = 0;
};

TEST(RoundLoopAside, PlainRoundsGoOnWhileTheDrafterIsSlowToHearVerdicts) {
  constexpr int kTokens = 20;
  SessionSpec spec;
  spec.prompt = {1, 2, 3};
  spec.max_new_tokens = kTokens;
  HeldDrafter drafter;
  CountingVerifier verifier;
  LoopOptions opts;
  opts.k = KPolicy::Scripted({0});
  opts.overlap = true;
  std::vector<TokenId> out;
  opts.on_tokens = [&](absl::Span<const TokenId> ids) {
    out.insert(out.end(), ids.begin(), ids.end());
    return true;
  };
  auto run = std::async(std::launch::async, [&] { return RunSpeculative(spec, &drafter, verifier, opts); });
  // Every round is verified while the drafter has not answered the first
  // verdict (before, each round waited for the drafter's answer).
  const bool all_rounds = verifier.WaitForRounds(kTokens, 60s);
  drafter.Release();
  absl::StatusOr<LoopStats> stats = run.get();
  ASSERT_TRUE(all_rounds) << "the rounds waited for the drafter";
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->fallbacks, 0);
  std::vector<TokenId> want;
  for (int r = 0; r < kTokens; ++r) want.push_back(100 + r);
  EXPECT_EQ(out, want);
  // It heard every verdict, in order: round r carries round r - 1's token.
  const std::vector<std::pair<int64_t, TokenId>> heard = drafter.heard();
  ASSERT_EQ(heard.size(), static_cast<size_t>(kTokens));
  for (int r = 0; r < kTokens; ++r) {
    EXPECT_EQ(heard[r].first, r);
    EXPECT_EQ(heard[r].second, r == 0 ? -1 : 100 + r - 1) << "round " << r;
  }
}

}  // namespace
}  // namespace specserve
