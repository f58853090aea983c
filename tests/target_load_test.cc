// Unit tests for spec/target_load.h: the cost of a batched pass of a given
// width from the target's report (its table by width, and its line).
#include "spec/target_load.h"

#include "gtest/gtest.h"

namespace specserve {
namespace {

// A staircase (the kind of costs tiled kernels give): passes of 1 / 5 / 9 /
// 17 tokens, 47 / 56 / 100 / 166 ms, and a line fitted over them.
TargetLoad Tiled() { return TargetLoad{true, 0.040, 0.0075, 1, 1, {{1, 0.047}, {5, 0.056}, {9, 0.100}, {17, 0.166}}}; }

TEST(PassSecondsTest, NoTableIsTheLine) {
  const TargetLoad line{true, 0.040, 0.0075, 1, 1, {}};
  EXPECT_DOUBLE_EQ(PassSeconds(line, 4), 0.070);
  EXPECT_GT(PassSeconds(TargetLoad{}, 3), 0);  // never 0: callers divide
}

TEST(PassSecondsTest, InterpolatesBetweenMeasuredWidths) {
  const TargetLoad l = Tiled();
  EXPECT_DOUBLE_EQ(PassSeconds(l, 5), 0.056);
  EXPECT_DOUBLE_EQ(PassSeconds(l, 3), 0.047 + 0.009 * 0.5);
  EXPECT_DOUBLE_EQ(PassSeconds(l, 13), 0.133);
}

TEST(PassSecondsTest, PastTheTableAddsAtLeastItsLastSlope) {
  TargetLoad l = Tiled();
  // Last two points: 66 ms over 8 tokens, dearer than the line's 7.5 ms.
  EXPECT_DOUBLE_EQ(PassSeconds(l, 33), 0.166 + 16 * (0.066 / 8));
  l.seconds_per_token = 0.02;  // the line is dearer: it wins
  EXPECT_DOUBLE_EQ(PassSeconds(l, 33), 0.166 + 16 * 0.02);
}

TEST(PassSecondsTest, BelowTheTableFollowsTheLineDownToItsFixedCost) {
  TargetLoad l = Tiled();
  l.passes.erase(l.passes.begin());  // first point: 5 tokens, 56 ms
  EXPECT_DOUBLE_EQ(PassSeconds(l, 4), 0.056 - 0.0075);
  EXPECT_DOUBLE_EQ(PassSeconds(l, 1), 0.040);  // 56 - 30 ms would be below the fixed cost
}

}  // namespace
}  // namespace specserve
