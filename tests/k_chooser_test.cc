// Unit tests for coordinator/k_cost_model.h and coordinator/k_chooser.h on
// their own: the model as a function of its inputs, and limits composing in
// the adaptive choice. tests/k_policy_test.cc and tests/k_policy_load_test.cc
// test the policy that keeps the inputs.
#include "coordinator/k_chooser.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <vector>

#include "coordinator/k_cost_model.h"
#include "gtest/gtest.h"

namespace specserve {
namespace {

// Acceptance 0.75 (the prior); verify 10 ms + 2 ms a token; the draft 3 ms
// a token on demand; with `load`, a report of it.
KCostInputs Inputs(const TargetLoad& load = TargetLoad{}) {
  KCostInputs in;
  for (int k : {2, 4, 2, 4}) {
    in.verify.Add(k + 1, 0.010 + 0.002 * (k + 1), 0.95);
    in.draft.Add(k, 0.003 * k, 0.95);
  }
  in.network_seconds = 0.001;
  in.load = load;
  return in;
}

TEST(KCostModel, IsAFunctionOfItsInputs) {
  const KCostModel m(Inputs());
  EXPECT_DOUBLE_EQ(m.Acceptance(), 0.75);
  EXPECT_DOUBLE_EQ(m.ExpectedTokens(0), 1.0);
  EXPECT_DOUBLE_EQ(m.ExpectedTokens(3), (1 - std::pow(0.75, 4)) / 0.25);
  EXPECT_NEAR(m.VerifySeconds(5), 0.020, 1e-12);
  EXPECT_NEAR(m.DraftSeconds(3), 0.009, 1e-12);
  EXPECT_EQ(m.DraftSeconds(0), 0.0);
  // Without a report: this session's verify pass and draft.
  for (int k = 1; k <= kMaxRoundK; ++k) {
    EXPECT_DOUBLE_EQ(m.RoundSeconds(k), m.VerifySeconds(k + 1) + m.DraftSeconds(k)) << k;
    EXPECT_DOUBLE_EQ(m.Rate(k), m.ExpectedTokens(k) / m.RoundSeconds(k)) << k;
  }
  const KCostModel again(Inputs());
  EXPECT_EQ(again.Rate(4), m.Rate(4));
  EXPECT_FALSE(m.batched());
  EXPECT_EQ(KCostModel(KCostInputs{}).VerifySeconds(5), 0.0);  // nothing measured
}

TEST(KCostModel, ALoadReportPricesTheBatchsPass) {
  // 4 sessions a pass, 8 open: a round waits for the pass over 4 (K + 1)
  // tokens, and the target owes two such passes a round.
  const TargetLoad load{true, 0.020, 0.001, 4, 8, {}};
  const KCostModel m(Inputs(load));
  EXPECT_TRUE(m.batched());
  for (int k = 0; k <= 4; ++k) {
    const double pass = PassSeconds(load, 4.0 * (k + 1));
    EXPECT_DOUBLE_EQ(m.RoundSeconds(k), std::max(0.001 + pass + m.DraftSeconds(k), 2 * pass)) << k;
  }
}

TEST(KCostModel, AReadyLookAheadMakesTheDraftCheaper) {
  KCostInputs in = Inputs();
  const double on_demand = KCostModel(in).DraftSeconds(2);
  in.ahead_hits = 1;
  in.ahead_chances = 2;   // g = 0.5
  in.ahead_wait = 0.0001;
  const double h = 0.75 * 0.75 * 0.5;
  EXPECT_DOUBLE_EQ(KCostModel(in).DraftSeconds(2), (1 - h) * on_demand + h * 0.0001);
  EXPECT_DOUBLE_EQ(KCostModel(in).OnDemandDraftSeconds(2), on_demand);
}

TEST(KChooser, FixedIsItsK) {
  EXPECT_EQ(ChooseFixed(3).k, 3);
  EXPECT_EQ(ChooseFixed(3).reason, KReason::kFixed);
  EXPECT_EQ(ChooseFixed(3).gain, 0.0);
}

TEST(KChooser, LimitsComposeByTheLargestPremium) {
  const KCostModel m(Inputs(TargetLoad{true, 0.020, 0.001, 1, 1, {}}));
  const KChoice free = ChooseAdaptive(m, {});
  ASSERT_GT(free.k, 0);
  ASSERT_EQ(free.reason, KReason::kBest);
  ASSERT_GT(free.gain, 1.1);
  auto asks = [](double factor, KReason reason) {
    return KLimit([=](int32_t k) { return k > 0 ? KPremium{factor, reason} : KPremium{}; });
  };
  // A premium below the gain still drafts; above it, plain with the reason
  // of the limit that asked most, the gain unchanged.
  const std::vector<KLimit> small{asks(1.01, KReason::kPlainMargin)};
  EXPECT_GT(ChooseAdaptive(m, small).k, 0);
  const std::vector<KLimit> both{asks(1.01, KReason::kPlainMargin), asks(free.gain * 1.1, KReason::kPlainLate)};
  const KChoice held = ChooseAdaptive(m, both);
  EXPECT_EQ(held.k, 0);
  EXPECT_EQ(held.reason, KReason::kPlainLate);
  EXPECT_DOUBLE_EQ(held.gain, free.gain);
  const std::vector<KLimit> reversed{both[1], both[0]};
  EXPECT_EQ(ChooseAdaptive(m, reversed).reason, KReason::kPlainLate);
}

TEST(KChooser, WithoutAReportKStaysAtLeastOne) {
  // K = 0 is a candidate only with a load report.
  const std::vector<KLimit> never{[](int32_t k) { return KPremium{k > 0 ? 100.0 : 1.0, KReason::kPlainMargin}; }};
  const KChoice unreported = ChooseAdaptive(KCostModel(Inputs()), never);
  EXPECT_GE(unreported.k, kMinAdaptiveK);
  EXPECT_EQ(unreported.reason, KReason::kBest);
  EXPECT_EQ(ChooseAdaptive(KCostModel(Inputs(TargetLoad{true, 0.020, 0.001, 1, 1, {}})), never).k, 0);
}

TEST(KChooser, TheLoadLimits) {
  // One session a pass: no premium.
  const KCostModel alone(Inputs(TargetLoad{true, 0.020, 0.001, 1, 1, {}}));
  EXPECT_EQ(BatchMargin(alone)(2).factor, 1.0);
  EXPECT_EQ(LatePremium(alone, true)(2).factor, 1.0);
  // A batch of plain mates whose gather is shorter than a block drafted on
  // demand: the margin for any K > 0, the late premium too.
  TargetLoad load{true, 0.020, 0.001, 4, 4, {}};
  load.tokens_per_session = 1.0;
  load.gather_seconds = 0.001;
  const KCostModel batch(Inputs(load));
  EXPECT_EQ(BatchMargin(batch)(0).factor, 1.0);
  EXPECT_DOUBLE_EQ(BatchMargin(batch)(1).factor, 1 + kLoadMargin);
  EXPECT_DOUBLE_EQ(LatePremium(batch, false)(1).factor, 1 + kLonePremium);
  EXPECT_EQ(LatePremium(batch, false)(1).reason, KReason::kPlainLate);
  // Mates that draft, or a gather that waits for the block: not late,
  // unless it is a first round among plain mates.
  load.tokens_per_session = 2.0;
  EXPECT_EQ(LatePremium(KCostModel(Inputs(load)), false)(1).factor, 1.0);
  load.tokens_per_session = 1.0;
  load.gather_seconds = 1.0;
  const KCostModel waits(Inputs(load));
  EXPECT_EQ(LatePremium(waits, false)(1).factor, 1.0);
  EXPECT_DOUBLE_EQ(LatePremium(waits, true)(1).factor, 1 + kLonePremium);

  EXPECT_FALSE(PlainAtSessions(load, 0));
  EXPECT_TRUE(PlainAtSessions(load, 4));
  EXPECT_FALSE(PlainAtSessions(load, 5));
  EXPECT_FALSE(PlainAtSessions(TargetLoad{}, 1));
}

TEST(KChooser, ReasonNamesAreTheMetricLabels) {
  const char* want[] = {"fixed", "initial", "best", "explore", "plain_rate", "plain_margin", "plain_late", "plain_load"};
  ASSERT_EQ(std::size(want), static_cast<size_t>(kKReasons));
  for (int i = 0; i < kKReasons; ++i) EXPECT_STREQ(KReasonName(static_cast<KReason>(i)), want[i]);
}

}  // namespace
}  // namespace specserve
