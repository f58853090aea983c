// --cpus (rpc/cpu_affinity.h): the list grammar, and that pinning takes
// effect for the process and for threads started after it.
#include "rpc/cpu_affinity.h"

#include <sched.h>

#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace specserve::rpc {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CpuListTest, ParsesCoresAndRanges) {
  EXPECT_THAT(*ParseCpuList("0"), ElementsAre(0));
  EXPECT_THAT(*ParseCpuList("3,1"), ElementsAre(1, 3));
  EXPECT_THAT(*ParseCpuList("0-2,6,1"), ElementsAre(0, 1, 2, 6));
  EXPECT_TRUE(ParseCpuList("")->empty());
}

TEST(CpuListTest, RefusesWhatIsNotAList) {
  for (const char* bad : {"a", "1-", "-1", "3-1", "1,,2", "0-1-2", "99999"}) {
    absl::StatusOr<std::vector<int>> r = ParseCpuList(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("--cpus")) << bad;
  }
}

// Restores the original mask at the end.
TEST(PinTest, PinsTheProcessAndItsNewThreads) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; ++c) {
    if (CPU_ISSET(c, &before)) first = c;
  }
  ASSERT_GE(first, 0);
  ASSERT_TRUE(PinProcessToCpus({first}).ok());
  int in_thread = -1;
  std::thread([&] {
    cpu_set_t s;
    sched_getaffinity(0, sizeof(s), &s);
    in_thread = CPU_COUNT(&s) == 1 && CPU_ISSET(first, &s) ? first : -2;
  }).join();
  EXPECT_EQ(in_thread, first);
  EXPECT_EQ(sched_getcpu(), first);
  ASSERT_EQ(sched_setaffinity(0, sizeof(before), &before), 0);
}

TEST(PinTest, ACoreTheMachineLacksIsAClearError) {
  absl::Status s = PinProcessToCpus({CPU_SETSIZE - 1});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("--cpus"));
  EXPECT_TRUE(PinProcessToCpus({}).ok());
}

}  // namespace
}  // namespace specserve::rpc
