// Unit tests for rpc/pass_cost.h: the fitted pass-cost line and the load a
// service reports with its verdicts.
#include "rpc/pass_cost.h"

#include <cmath>

#include "gtest/gtest.h"

namespace specserve::rpc {
namespace {

TEST(PassCostModel, UnknownBeforeTheFirstPass) {
  PassCostModel m;
  EXPECT_FALSE(m.Estimate().known);
  m.Observe(0, 1, 0.1);   // no tokens
  m.Observe(5, 0, 0.1);   // no sessions
  m.Observe(5, 1, -1.0);  // negative time
  EXPECT_FALSE(m.Estimate().known);
}

TEST(PassCostModel, RecoversFixedAndPerTokenCosts) {
  PassCostModel m;
  // Passes of 1..40 tokens costing 4 ms + 0.5 ms per token, 1..4 sessions.
  for (int i = 0; i < 400; ++i) {
    const int64_t tokens = 1 + (i * 7) % 40, sessions = 1 + i % 4;
    m.Observe(tokens, sessions, 0.004 + 0.0005 * tokens);
  }
  const TargetLoad l = m.Estimate();
  ASSERT_TRUE(l.known);
  EXPECT_NEAR(l.fixed_seconds, 0.004, 1e-9);
  EXPECT_NEAR(l.seconds_per_token, 0.0005, 1e-9);
  EXPECT_NEAR(l.sessions_per_pass, 2.5, 0.1);
}

TEST(PassCostModel, OneShapeAssumesAQuarterPerToken) {
  PassCostModel m;
  for (int i = 0; i < 50; ++i) m.Observe(8, 2, 0.016);
  const TargetLoad l = m.Estimate();
  EXPECT_NEAR(l.seconds_per_token, 0.0005, 1e-12);
  EXPECT_NEAR(l.fixed_seconds, 0.012, 1e-12);
  EXPECT_NEAR(l.sessions_per_pass, 2.0, 1e-12);
  EXPECT_NEAR(l.tokens_per_session, 4.0, 1e-12);  // 2 sessions of K 3 a pass
}

TEST(PassCostModel, TokensPerSessionTellsPlainBatchesFromDraftingOnes) {
  PassCostModel m;
  for (int i = 0; i < 200; ++i) m.Observe(16, 16, 0.1);  // 16 plain sessions
  EXPECT_NEAR(m.Estimate().tokens_per_session, 1.0, 1e-12);
  for (int i = 0; i < 300; ++i) m.Observe(6, 2, 0.05);  // 2 sessions of K 2
  EXPECT_NEAR(m.Estimate().tokens_per_session, 3.0, 0.05);  // the 16-session passes fade slowly
}

TEST(PassCostModel, FollowsAChangeOfLoad) {
  PassCostModel m;
  for (int i = 0; i < 200; ++i) m.Observe(16 + i % 8, 8, 0.002 + 0.001 * (16 + i % 8));
  EXPECT_NEAR(m.Estimate().sessions_per_pass, 8.0, 0.01);
  for (int i = 0; i < 300; ++i) m.Observe(2 + i % 6, 1, 0.002 + 0.001 * (2 + i % 6));
  EXPECT_LT(m.Estimate().sessions_per_pass, 1.1);
  EXPECT_NEAR(m.Estimate().seconds_per_token, 0.001, 1e-6);
}

TEST(PassCostModel, CostsStayNonNegativeOnNoise) {
  PassCostModel m;
  // Larger passes measured as cheaper (noise): slope clamps at 0, fixed at the mean.
  for (int i = 0; i < 100; ++i) m.Observe(1 + i % 10, 1, 0.02 - 0.001 * (i % 10));
  const TargetLoad l = m.Estimate();
  EXPECT_GE(l.seconds_per_token, 0.0);
  EXPECT_GE(l.fixed_seconds, 0.0);
}

TEST(PassCostModel, TablesEachWidthCloserThanTheLine) {
  // Tiled kernels: 1..5 tokens cost nearly one pass, then a step per tile of
  // 5, which no line fits.
  PassCostModel m;
  auto cost = [](double t) { return 0.040 + 0.002 * t + 0.040 * std::floor((t - 1) / 5); };
  for (int i = 0; i < 300; ++i) {
    const int64_t t = 1 + (i * 7) % 17;
    m.Observe(t, 1, cost(static_cast<double>(t)));
  }
  const TargetLoad l = m.Estimate();
  ASSERT_EQ(l.passes.size(), 16u + 1u);  // 1..16 and the bucket holding 17
  int closer = 0;
  for (const PassCostPoint& p : l.passes) {
    const double truth = cost(std::round(p.tokens));
    const double line = l.fixed_seconds + l.seconds_per_token * p.tokens;
    EXPECT_DOUBLE_EQ(PassSeconds(l, p.tokens), p.seconds);
    // Each width's own passes outweigh the line's prior about 3 to 1.
    EXPECT_LE(std::abs(p.seconds - truth), 0.35 * std::abs(line - truth) + 1e-12) << p.tokens;
    closer += std::abs(line - truth) > 0.002;
  }
  EXPECT_GE(closer, 10);  // the line misprices most widths by more than 2 ms
}

TEST(PassCostModel, AnOutlierWidthNobodyChoosesAgainDriftsBackToTheLine) {
  // One pass of 2 tokens measured at 90 ms (a hiccup) among passes of 1 and
  // 5 tokens at 50 and 60 ms: were its mean its price, K 1 would look dear,
  // be chosen no more, and never be measured again.
  PassCostModel m;
  m.Observe(2, 1, 0.090);
  auto price2 = [&m] { return PassSeconds(m.Estimate(), 2); };
  for (int i = 0; i < 10; ++i) m.Observe(i % 2 ? 5 : 1, 1, i % 2 ? 0.060 : 0.050);
  EXPECT_LT(price2(), 0.075);  // its one pass against the line's prior of 2
  EXPECT_GT(price2(), 0.060);
  for (int i = 0; i < 290; ++i) m.Observe(i % 2 ? 5 : 1, 1, i % 2 ? 0.060 : 0.050);
  EXPECT_NEAR(price2(), 0.0525, 0.001);  // forgotten: the table's 1 and 5, interpolated
}

TEST(PassCostModel, WideWidthsShareBucketsAndTheTableNeverFalls) {
  PassCostModel m;
  m.Observe(100, 20, 0.30);
  m.Observe(110, 22, 0.26);  // same bucket as 100 (25% apart)
  m.Observe(40, 8, 0.35);    // dearer than the wider bucket: noise
  const TargetLoad l = m.Estimate();
  ASSERT_EQ(l.passes.size(), 2u);
  EXPECT_NEAR(l.passes[0].tokens, 40, 1e-12);
  EXPECT_GT(l.passes[1].tokens, 100);
  EXPECT_LT(l.passes[1].tokens, 110);
  EXPECT_GE(l.passes[1].seconds, l.passes[0].seconds);  // raised to the narrower width's cost
}

TEST(PassCostModel, ForgetsWidthsNotSeenForLong) {
  PassCostModel m;
  m.Observe(9, 1, 0.1);
  // kAge^n >= kForgetWeight for n < log(0.05) / log(0.99) = 298.1.
  for (int i = 0; i < 298; ++i) m.Observe(2, 1, 0.05);
  EXPECT_EQ(m.Estimate().passes.size(), 2u);
  m.Observe(2, 1, 0.05);
  ASSERT_EQ(m.Estimate().passes.size(), 1u);
  EXPECT_EQ(m.Estimate().passes[0].tokens, 2);
}

}  // namespace
}  // namespace specserve::rpc
