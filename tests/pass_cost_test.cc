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

TEST(PassCostModel, TablesEachWidthItsOwnMean) {
  // Tiled kernels: 1..5 tokens cost nearly one pass, then a step per tile of
  // 5, which no line fits.
  PassCostModel m;
  auto cost = [](int64_t t) { return 0.040 + 0.002 * t + 0.040 * ((t - 1) / 5); };
  for (int i = 0; i < 300; ++i) {
    const int64_t t = 1 + (i * 7) % 17;
    m.Observe(t, 1, cost(t));
  }
  const TargetLoad l = m.Estimate();
  ASSERT_EQ(l.passes.size(), 16u + 1u);  // 1..16 and the bucket holding 17
  for (const PassCostPoint& p : l.passes) {
    EXPECT_NEAR(p.seconds, cost(std::llround(p.tokens)), 1e-12) << p.tokens;
    EXPECT_NEAR(PassSeconds(l, p.tokens), p.seconds, 1e-12);
  }
  // The line misprices both ends of the block; the table does not.
  const double line5 = l.fixed_seconds + l.seconds_per_token * 5;
  EXPECT_GT(std::abs(line5 - cost(5)) / cost(5), 0.1);
}

TEST(PassCostModel, WideWidthsShareBucketsAndTheTableNeverFalls) {
  PassCostModel m;
  m.Observe(100, 20, 0.30);
  m.Observe(110, 22, 0.26);  // same bucket as 100 (25% apart): their mean
  m.Observe(40, 8, 0.35);    // dearer than the wider bucket: noise
  const TargetLoad l = m.Estimate();
  ASSERT_EQ(l.passes.size(), 2u);
  EXPECT_NEAR(l.passes[0].tokens, 40, 1e-12);
  EXPECT_NEAR(l.passes[1].tokens, (100 * 0.9 + 110) / 1.9, 1e-9);
  EXPECT_EQ(l.passes[1].seconds, 0.35);  // raised to the narrower width's cost
}

TEST(PassCostModel, ForgetsWidthsNotSeenForLong) {
  PassCostModel m;
  m.Observe(9, 1, 0.1);
  for (int64_t i = 1; i < PassCostModel::kForgetPasses; ++i) m.Observe(2, 1, 0.05);
  EXPECT_EQ(m.Estimate().passes.size(), 2u);
  m.Observe(2, 1, 0.05);
  ASSERT_EQ(m.Estimate().passes.size(), 1u);
  EXPECT_EQ(m.Estimate().passes[0].tokens, 2);
}

}  // namespace
}  // namespace specserve::rpc
