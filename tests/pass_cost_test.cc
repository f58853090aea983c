// Unit tests for rpc/pass_cost.h: the fitted pass-cost line and the load a
// service reports with its verdicts.
#include "rpc/pass_cost.h"

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

}  // namespace
}  // namespace specserve::rpc
