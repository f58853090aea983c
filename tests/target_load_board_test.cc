// Unit tests for what a coordinator's requests share about the target and
// each other (coordinator/target_load_board.h): the target's latest load
// report, and the learned adaptive-K policy a new request starts from
// (KPolicy::Seed).
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "coordinator/k_policy.h"
#include "coordinator/target_load_board.h"
#include "gtest/gtest.h"
#include "spec/target_load.h"

namespace specserve {
namespace {

TEST(TargetLoadBoard, KeepsTheLatestKnownReportWhileItIsFresh) {
  TargetLoadBoard board;
  EXPECT_FALSE(board.Latest().has_value());
  board.Post(TargetLoad{}, 0.5);  // unknown: not posted
  EXPECT_FALSE(board.Latest().has_value());
  board.Post(TargetLoad{true, 0.01, 0.02, 3, 7, {}}, 0.004);
  board.Post(TargetLoad{true, 0.01, 0.02, 4, 9, {}}, 0.003);
  std::optional<TargetLoadBoard::Report> r = board.Latest();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->load.active_sessions, 9);
  EXPECT_DOUBLE_EQ(r->network_seconds, 0.003);
  EXPECT_FALSE(board.Latest(std::chrono::nanoseconds(0)).has_value());  // too old for that caller
}

TEST(TargetLoadBoard, ABurstOfRequestsCountsTheRequestsRunningNow) {
  // The last verdict of a quiet spell: 1 session, in every pass.
  TargetLoadBoard board;
  board.Post(TargetLoad{true, 0.05, 0.002, 1, 1, {}}, 0.001);
  {
    std::vector<std::unique_ptr<TargetLoadBoard::Live>> burst;
    for (int i = 0; i < 8; ++i) burst.push_back(std::make_unique<TargetLoadBoard::Live>(&board));
    EXPECT_EQ(board.live(), 8);
    std::optional<TargetLoadBoard::Report> r = board.Latest();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->load.active_sessions, 8);
    EXPECT_EQ(r->load.sessions_per_pass, 8);
    // A saturated target's report: what it says stands.
    board.Post(TargetLoad{true, 0.05, 0.002, 12, 16, {}}, 0.001);
    r = board.Latest();
    EXPECT_EQ(r->load.active_sessions, 16);
    EXPECT_EQ(r->load.sessions_per_pass, 12);
    // Half the sessions in each pass: so are the coordinator's new ones.
    board.Post(TargetLoad{true, 0.05, 0.002, 1, 2, {}}, 0.001);
    r = board.Latest();
    EXPECT_EQ(r->load.active_sessions, 8);
    EXPECT_EQ(r->load.sessions_per_pass, 4);
  }
  EXPECT_EQ(board.live(), 0);
  EXPECT_EQ(board.Latest()->load.active_sessions, 2);
}

// Under a plain batch of 8 (the ~1B Q8_0 target through the services at 8
// clients, a CPU target: a pass of 8 tokens 112 ms, 16 150, 40 260; the
// batch-mates decode plainly), what an earlier request measured there: about
// 0.55 of its drafted tokens accepted, a wait of 25 ms + 15 ms a drafted token.
const TargetLoad kPlainBatchOf8{true, 0.07, 0.0058, 8, 8, {{8, 0.112}, {16, 0.150}, {40, 0.260}}, 1.0, 0.05};

KPolicy LearnedAtEightClients() {
  KPolicy p = KPolicy::Adaptive(4);
  p.ObserveTarget(kPlainBatchOf8, 0.001);
  for (int i = 0; i < 30; ++i) {
    const int32_t k = i % 2 == 0 ? 1 : 2;
    const int32_t accepted = i % 9 < 5 ? k : 0;  // 5 of 9 rounds take the whole block
    p.Observe(k, accepted, 0.025 + 0.015 * k, 0.17);
  }
  return p;
}

// The same batch reported by a target that gives neither the batch-mates'
// tokens per session nor its gather: only the batch margin applies.
const TargetLoad kBatchOf8{true, 0.07, 0.0058, 8, 8, {{8, 0.112}, {16, 0.150}, {40, 0.260}}, 0.0, 0.0};

TEST(KPolicySeed, ANewRequestUnderAPlainBatchStartsFromWhatOthersMeasured) {
  // Unseeded, a new request takes acceptance 0.75 and a free draft: it
  // expects drafting to gain about 40%, so it would draft its first round
  // (and open a draft session it never uses) but for the premium a first
  // round among plain batch-mates must promise (k_policy.h); where the
  // target does not say the mates are plain, it drafts.
  KPolicy fresh = KPolicy::Adaptive(4);
  fresh.ObserveTarget(kPlainBatchOf8, 0.001);
  EXPECT_EQ(fresh.Next(), 0);
  fresh.ObserveTarget(kBatchOf8, 0.001);
  ASSERT_GT(fresh.Next(), 0);
  // Seeded with an earlier request's policy it starts plain.
  const KPolicy learned = LearnedAtEightClients();
  ASSERT_TRUE(learned.learned());
  ASSERT_EQ(learned.Next(), 0);
  KPolicy seeded = KPolicy::Adaptive(4);
  seeded.ObserveTarget(kBatchOf8, 0.001);
  seeded.Seed(learned);
  EXPECT_NEAR(seeded.acceptance_estimate(), learned.acceptance_estimate(), 1e-9);
  EXPECT_NEAR(seeded.DraftCost(2), learned.DraftCost(2), 1e-9);
  EXPECT_EQ(seeded.Next(), 0);
}

TEST(KPolicySeed, TheRequestsOwnRoundsSoonOutweighTheSeed) {
  KPolicy pessimist = KPolicy::Adaptive(4);
  for (int i = 0; i < 40; ++i) pessimist.Observe(4, 0, 0.02, 0.1);  // nothing accepted
  KPolicy p = KPolicy::Adaptive(4);
  p.Seed(pessimist);
  EXPECT_LT(p.acceptance_estimate(), 0.1);
  // A prompt the draft knows well: whole blocks accepted.
  for (int i = 0; i < 6; ++i) p.Observe(4, 4, 0.02, 0.1);
  EXPECT_GT(p.acceptance_estimate(), 0.8);
}

TEST(KPolicySeed, ASeededRequestThatNeverDraftedExploresWhenAlone) {
  // One client (the ~1B Q8_0 pair through the services, a CPU target):
  // the request before ended on a prompt the draft did not know, and posted
  // that. Seeded with it the next request starts plain; its plain rounds
  // post nothing, so unless it explores, the next one starts from the same
  // stale figures, and so on (docs/decisions/0009-adaptive-k-exploration.md).
  const TargetLoad lone{true, 0.040, 0.004, 1, 1, {{1, 0.045}, {2, 0.049}, {3, 0.052}}};
  KPolicy unlucky = KPolicy::Adaptive(4);
  unlucky.ObserveTarget(lone, 0.001);
  for (int i = 0; i < 12; ++i) unlucky.Observe(2, 0, 0.025, 0.052);
  ASSERT_EQ(unlucky.Next(), 0);
  KPolicy p = KPolicy::Adaptive(4);
  p.ObserveTarget(lone, 0.001);
  p.Seed(unlucky);
  ASSERT_EQ(p.Next(), 0);
  int plain = 0;  // plain rounds before it drafts again
  while (p.Next() == 0 && plain < 4 * KPolicy::kExploreAfter) {
    p.Observe(0, 0, 0.0, 0.045);
    p.ObserveTarget(lone, 0.001);
    ++plain;
  }
  EXPECT_EQ(plain, KPolicy::kExploreAfter);
  EXPECT_EQ(p.Choose().reason, KPolicy::Reason::kExplore);
  // In a batch of 2 it does not (its exploration would be late among plain
  // mates): it leaves that to requests that have drafted.
  TargetLoad pair = lone;
  pair.sessions_per_pass = pair.active_sessions = 2;
  KPolicy batched = KPolicy::Adaptive(4);
  batched.ObserveTarget(pair, 0.001);
  batched.Seed(unlucky);
  for (int i = 0; i < 8 * KPolicy::kExploreAfter; ++i) {
    ASSERT_EQ(batched.Next(), 0) << "plain round " << i;
    batched.Observe(0, 0, 0.0, 0.049);
    batched.ObserveTarget(pair, 0.001);
  }
}

TEST(KPolicySeed, OnlyALearnedPolicySeedsAndOnlyBeforeTheFirstRound) {
  KPolicy p = KPolicy::Adaptive(4);
  p.Seed(KPolicy::Adaptive(4));  // has seen no round: nothing to take
  EXPECT_NEAR(p.acceptance_estimate(), 0.75, 1e-9);
  p.Observe(4, 4, 0.02, 0.1);
  KPolicy pessimist = KPolicy::Adaptive(4);
  for (int i = 0; i < 40; ++i) pessimist.Observe(4, 0, 0.02, 0.1);
  const double before = p.acceptance_estimate();
  p.Seed(pessimist);  // it has its own rounds now
  EXPECT_DOUBLE_EQ(p.acceptance_estimate(), before);
  KPolicy fixed = KPolicy::Fixed(4);
  fixed.Seed(pessimist);
  EXPECT_EQ(fixed.Next(), 4);
}

TEST(TargetLoadBoard, KeepsTheLastLearnedPolicyOfEachDrafter) {
  constexpr int kModel = 1, kNgram = 2;
  TargetLoadBoard board;
  EXPECT_FALSE(board.LatestPolicy(kModel).has_value());
  board.PostPolicy(kModel, KPolicy::Adaptive(4));  // learned nothing: not posted
  EXPECT_FALSE(board.LatestPolicy(kModel).has_value());
  board.PostPolicy(kModel, LearnedAtEightClients());
  std::optional<KPolicy> p = board.LatestPolicy(kModel);
  ASSERT_TRUE(p.has_value());
  EXPECT_NEAR(p->acceptance_estimate(), LearnedAtEightClients().acceptance_estimate(), 1e-12);
  EXPECT_FALSE(board.LatestPolicy(kNgram).has_value());  // another drafter's: nothing yet
  EXPECT_FALSE(board.LatestPolicy(kModel, std::chrono::nanoseconds(0)).has_value());
}

}  // namespace
}  // namespace specserve
