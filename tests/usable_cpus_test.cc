// --threads auto (common/usable_cpus.h): the cgroup quota grammars, the
// rounding, the flag, and that a process pinned to one core counts one.
#include "common/usable_cpus.h"

#include <sched.h>

#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace specserve {
namespace {

using ::testing::HasSubstr;
using ::testing::Optional;
using ::testing::DoubleEq;

TEST(UsableCpusTest, ReadsCgroupV2CpuMax) {
  EXPECT_THAT(CgroupV2CpuQuota("200000 100000\n"), Optional(DoubleEq(2.0)));
  EXPECT_THAT(CgroupV2CpuQuota("150000 100000"), Optional(DoubleEq(1.5)));
  EXPECT_EQ(CgroupV2CpuQuota("max 100000\n"), std::nullopt);
  for (const char* bad : {"", "100000", "a b", "0 100000", "100000 0", "1 2 3"}) {
    EXPECT_EQ(CgroupV2CpuQuota(bad), std::nullopt) << bad;
  }
}

TEST(UsableCpusTest, ReadsCgroupV1Quota) {
  EXPECT_THAT(CgroupV1CpuQuota("50000\n", "100000\n"), Optional(DoubleEq(0.5)));
  EXPECT_EQ(CgroupV1CpuQuota("-1\n", "100000\n"), std::nullopt);
  EXPECT_EQ(CgroupV1CpuQuota("x", "100000"), std::nullopt);
}

TEST(UsableCpusTest, QuotaLowersTheCoresRoundedUp) {
  EXPECT_EQ(UsableCpus(8, std::nullopt), 8);
  EXPECT_EQ(UsableCpus(8, 2.0), 2);
  EXPECT_EQ(UsableCpus(8, 1.5), 2);
  EXPECT_EQ(UsableCpus(8, 0.25), 1);
  EXPECT_EQ(UsableCpus(2, 4.0), 2);
  EXPECT_EQ(UsableCpus(0, std::nullopt), 1);
}

TEST(UsableCpusTest, ThreadsFlag) {
  EXPECT_EQ(*ThreadsFromFlag("auto", 4), 4);
  EXPECT_EQ(*ThreadsFromFlag("auto", 4, 1), 3);
  EXPECT_EQ(*ThreadsFromFlag("auto", 1, 1), 1);
  EXPECT_EQ(*ThreadsFromFlag("3", 1), 3);
  for (const char* bad : {"0", "257", "-1", "two", ""}) {
    absl::StatusOr<int> r = ThreadsFromFlag(bad, 4);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("--threads"));
  }
}

// The affinity mask is the process's: a thread pinned to one core counts one
// (sched_getaffinity(0) reads the calling thread's mask).
TEST(UsableCpusTest, AffinityCountsThePinnedCores) {
  int seen = 0;
  std::thread t([&] {
    cpu_set_t set;
    CPU_ZERO(&set);
    ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
    int first = 0;
    while (!CPU_ISSET(first, &set)) ++first;
    CPU_ZERO(&set);
    CPU_SET(first, &set);
    ASSERT_EQ(sched_setaffinity(0, sizeof(set), &set), 0);
    seen = AffinityCpus();
  });
  t.join();
  EXPECT_EQ(seen, 1);
  EXPECT_GE(AffinityCpus(), 1);
  EXPECT_GE(UsableCpus(), 1);
  EXPECT_LE(UsableCpus(), AffinityCpus());
}

}  // namespace
}  // namespace specserve
