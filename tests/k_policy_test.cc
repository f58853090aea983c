// Unit tests for coordinator/k_policy.h: fixed K, and adaptive K choosing the
// K in [kMin, kMax] that maximises expected tokens per second from the
// observed acceptance and the measured draft / verify costs.
#include "coordinator/k_policy.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace specserve {
namespace {

// One observed round.
struct Round {
  int32_t k;
  int32_t accepted;
  double draft_s;
  double verify_s;
};

void Feed(KPolicy& p, const std::vector<Round>& rounds) {
  for (const Round& r : rounds) p.Observe(r.k, r.accepted, r.draft_s, r.verify_s);
}

// `n` rounds alternating K = 4 and K = 8 (two distinct K, so the verify-cost
// slope is fitted, not assumed). `accepted(k)` gives the accepted count;
// verify time is v0 + v1 * (k + 1); each draft step costs `step` seconds.
template <typename Acc>
std::vector<Round> Rounds(int n, Acc accepted, double v0, double v1, double step) {
  std::vector<Round> out;
  for (int i = 0; i < n; ++i) {
    const int32_t k = i % 2 == 0 ? 4 : 8;
    out.push_back(Round{k, accepted(k), step * k, v0 + v1 * (k + 1)});
  }
  return out;
}

TEST(KPolicyFixed, ReturnsItsKWhateverItObserves) {
  KPolicy p = KPolicy::Fixed(5);
  EXPECT_FALSE(p.adaptive());
  EXPECT_EQ(p.Next(), 5);
  // Rounds that would drive an adaptive policy to K = 1.
  for (int i = 0; i < 50; ++i) p.Observe(5, 0, 0.05, 1.0);
  EXPECT_EQ(p.Next(), 5);
  for (int i = 0; i < 50; ++i) p.Observe(5, 5, 1e-6, 1e-3);
  EXPECT_EQ(p.Next(), 5);
  EXPECT_EQ(KPolicy::Fixed(1).Next(), 1);
  EXPECT_EQ(KPolicy::Fixed(KPolicy::kMax).Next(), KPolicy::kMax);
  // Nothing compared: no gain to report.
  EXPECT_EQ(p.Choose().reason, KPolicy::Reason::kFixed);
  EXPECT_EQ(p.Choose().gain, 0.0);
  EXPECT_EQ(KPolicy::Scripted({0, 2}).Choose().reason, KPolicy::Reason::kFixed);
}

TEST(KPolicyAdaptive, StartsAtItsInitialK) {
  KPolicy p = KPolicy::Adaptive(6);
  EXPECT_TRUE(p.adaptive());
  EXPECT_EQ(p.Next(), 6);
  EXPECT_EQ(KPolicy::Adaptive().Next(), 4);
  EXPECT_EQ(p.VerifyCost(5), 0.0);  // nothing measured yet
  EXPECT_EQ(p.Choose().reason, KPolicy::Reason::kInitial);
  EXPECT_EQ(p.Choose().gain, 0.0);
  // A round with nothing drafted is not a round: still at the initial K.
  p.Observe(0, 0, 0.0, 0.01);
  EXPECT_EQ(p.Next(), 6);
}

TEST(KPolicyAdaptive, AcceptanceEstimateFollowsObservations) {
  KPolicy all = KPolicy::Adaptive();
  KPolicy none = KPolicy::Adaptive();
  for (int i = 0; i < 100; ++i) {
    all.Observe(4, 4, 0.004, 0.02);
    none.Observe(4, 0, 0.004, 0.02);
  }
  EXPECT_GT(all.acceptance_estimate(), 0.95);
  EXPECT_LT(none.acceptance_estimate(), 0.05);
  // Three of four accepted then a rejection, every round: a = 3 / (3 + 1).
  KPolicy three = KPolicy::Adaptive();
  for (int i = 0; i < 200; ++i) three.Observe(4, 3, 0.004, 0.02);
  EXPECT_NEAR(three.acceptance_estimate(), 0.75, 1e-3);
}

TEST(KPolicyAdaptive, LowAcceptancePicksSmallestK) {
  KPolicy p = KPolicy::Adaptive(8);
  Feed(p, Rounds(60, [](int32_t) { return 0; }, 0.02, 0.0, 1e-3));
  EXPECT_EQ(p.Next(), KPolicy::kMin);
}

TEST(KPolicyAdaptive, HighAcceptanceAndFlatVerifyCostPicksLargestK) {
  // GPU-like: the verify pass costs the same for any K, drafting is cheap.
  KPolicy p = KPolicy::Adaptive(2);
  Feed(p, Rounds(60, [](int32_t k) { return k; }, 0.02, 0.0, 1e-4));
  EXPECT_EQ(p.Next(), KPolicy::kMax);
}

TEST(KPolicyAdaptive, SteepVerifyCostPicksSmallerKThanFlatAtSameAcceptance) {
  // Same acceptance (3 accepted then a rejection, a = 0.75) for both.
  auto three = [](int32_t) { return 3; };
  KPolicy flat = KPolicy::Adaptive();
  Feed(flat, Rounds(60, three, 0.02, 0.0, 1e-4));
  // CPU-like: every extra token in the verify pass costs 10 ms.
  KPolicy steep = KPolicy::Adaptive();
  Feed(steep, Rounds(60, three, 0.001, 0.01, 1e-4));
  EXPECT_NEAR(flat.acceptance_estimate(), steep.acceptance_estimate(), 1e-12);
  // E(K) / (K + 1) falls with K, so a cost linear in K + 1 favours K = 1;
  // with a flat cost E(K) keeps growing towards 1 / (1 - a) = 4 tokens.
  EXPECT_EQ(steep.Next(), 1);
  EXPECT_GE(flat.Next(), 8);
  EXPECT_LE(flat.Next(), KPolicy::kMax);
}

TEST(KPolicyAdaptive, ExpensiveDraftingPicksSmallerK) {
  auto five_of_eight = [](int32_t k) { return k == 4 ? 4 : 5; };  // high acceptance
  KPolicy cheap = KPolicy::Adaptive();
  Feed(cheap, Rounds(60, five_of_eight, 0.02, 0.0, 1e-4));
  // Each draft step costs as much as a whole verify pass.
  KPolicy costly = KPolicy::Adaptive();
  Feed(costly, Rounds(60, five_of_eight, 0.02, 0.0, 0.02));
  EXPECT_LT(costly.Next(), cheap.Next());
}

TEST(KPolicyAdaptive, FitsVerifyCostLine) {
  KPolicy p = KPolicy::Adaptive();
  // Exact line y = 2 ms + 3 ms * tokens over three different K.
  for (int i = 0; i < 30; ++i) {
    for (int32_t k : {2, 5, 9}) p.Observe(k, 1, 1e-3 * k, 0.002 + 0.003 * (k + 1));
  }
  for (int32_t n : {1, 2, 6, 10, 17}) {
    EXPECT_NEAR(p.VerifyCost(n), 0.002 + 0.003 * n, 1e-9) << "n=" << n;
  }
}

TEST(KPolicyAdaptive, FollowsChangingAcceptance) {
  KPolicy p = KPolicy::Adaptive(4);
  Feed(p, Rounds(60, [](int32_t k) { return k; }, 0.02, 0.0, 1e-4));
  const int32_t easy = p.Next();
  // The text turns hard: nothing is accepted any more.
  Feed(p, Rounds(100, [](int32_t) { return 0; }, 0.02, 0.0, 1e-4));
  const int32_t hard = p.Next();
  EXPECT_GE(easy, 12);
  EXPECT_LE(hard, 2);
  // And easy again.
  Feed(p, Rounds(200, [](int32_t k) { return k; }, 0.02, 0.0, 1e-4));
  EXPECT_GE(p.Next(), 12);
}

TEST(KPolicyAdaptive, StaysWithinBoundsOnArbitraryObservations) {
  KPolicy p = KPolicy::Adaptive(3);
  uint64_t s = 12345;
  auto next = [&s] {  // deterministic LCG
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<uint32_t>(s >> 33);
  };
  for (int i = 0; i < 2000; ++i) {
    const int32_t k = p.Next();
    ASSERT_GE(k, KPolicy::kMin) << "round " << i;
    ASSERT_LE(k, KPolicy::kMax) << "round " << i;
    const int32_t accepted = static_cast<int32_t>(next() % (k + 1));
    // Costs from 0 to 100 ms, sometimes decreasing with K, sometimes zero.
    const double draft = (next() % 4 == 0) ? 0.0 : 1e-4 * (next() % 1000) * k;
    const double verify = 1e-4 * (next() % 1000);
    p.Observe(k, accepted, draft, verify);
    const double a = p.acceptance_estimate();
    ASSERT_TRUE(a >= 0.0 && a <= 1.0) << a;
    ASSERT_FALSE(std::isnan(p.VerifyCost(k + 1)));
  }
}

TEST(KPolicyAdaptive, DeterministicForTheSameObservations) {
  KPolicy a = KPolicy::Adaptive(5), b = KPolicy::Adaptive(5);
  for (int i = 0; i < 300; ++i) {
    ASSERT_EQ(a.Next(), b.Next()) << "round " << i;
    const int32_t k = a.Next();
    const int32_t accepted = (i * 7) % (k + 1);
    const double draft = 1e-3 * k * (1 + i % 3), verify = 0.01 + 0.002 * k + 1e-4 * (i % 5);
    a.Observe(k, accepted, draft, verify);
    b.Observe(k, accepted, draft, verify);
    ASSERT_EQ(a.acceptance_estimate(), b.acceptance_estimate());
    ASSERT_EQ(a.VerifyCost(k + 1), b.VerifyCost(k + 1));
  }
}

TEST(KPolicyAdaptive, TheDraftsFixedWaitIsNotChargedPerToken) {
  // Proposals of 1 and 4 tokens wait 24 and 51 ms: 15 ms fixed + 9 ms a
  // token. Charged per token (24 ms), a K of 3 would cost 72 ms; the line says 42.
  KPolicy p = KPolicy::Adaptive(4);
  for (int i = 0; i < 40; ++i) {
    const int32_t k = i % 2 == 0 ? 1 : 4;
    p.Observe(k, k, 0.015 + 0.009 * k, 0.05 + 0.01 * (k + 1));
  }
  EXPECT_NEAR(p.DraftCost(3), 0.042, 0.002);
  EXPECT_EQ(p.DraftCost(0), 0.0);
}

}  // namespace
}  // namespace specserve
