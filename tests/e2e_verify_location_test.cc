// Where the target verifies, through the three services: the target's
// metrics say so (specserve_verify_location, specserve_verify_duration_seconds).
// On CUDA (skipping, saying so, without a device): greedy output equals plain
// decoding through the services, and seeded sampled output with the verify
// step on the device equals, token for token, the output of the same CUDA
// services verifying on the host (SPECSERVE_CUDA_VERIFY=host: the logits
// copied back and the CPU Verify).
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/backend_ops_harness.h"
#include "tests/e2e_harness.h"

namespace specserve {
namespace {

using e2e::Cluster;
using e2e::Metric;
using e2e::Scrape;

v1::GenerateRequest Request(v1::Drafter drafter, float temperature, uint64_t seed) {
  v1::GenerateRequest req;
  req.set_text("def fibonacci(n):");
  req.set_max_tokens(48);
  req.set_drafter(drafter);
  req.set_k(4);
  req.set_temperature(temperature);
  req.set_top_k(temperature > 0 ? 40 : 0);
  req.set_seed(seed);
  return req;
}

e2e::ClusterOptions OnCuda() {
  e2e::ClusterOptions o;
  o.target_args = {"--backend", "cuda", "--device", "0"};
  o.draft_args = {"--backend", "cuda", "--device", "0"};
  return o;
}

TEST(VerifyLocation, TheCpuTargetSaysCpuAndTimesEachRound) {
  Cluster c;
  ASSERT_TRUE(c.ready) << c.Logs();
  e2e::StreamResult r = e2e::Generate(*c.stub, Request(v1::DRAFTER_MODEL, 0.0f, 0));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message() << c.Logs();
  const std::string m = Scrape(c.target_metrics);
  EXPECT_EQ(Metric(m, "specserve_verify_location", {"location=\"cpu\""}), 1) << m;
  EXPECT_GE(Metric(m, "specserve_verify_duration_seconds_count"), 1);
  EXPECT_EQ(Metric(m, "specserve_verify_bytes_to_host_total"), 0);  // the logits never were on a device
}

TEST(VerifyLocation, CudaServicesVerifyOnTheDeviceExactly) {
  if (!testing::HaveDevice()) GTEST_SKIP() << "no CUDA device";
  std::vector<std::vector<TokenId>> device_sampled;
  {
    Cluster c(OnCuda());
    ASSERT_TRUE(c.ready) << c.Logs();
    const e2e::StreamResult plain = e2e::Generate(*c.stub, Request(v1::DRAFTER_NONE, 0.0f, 0));
    const e2e::StreamResult spec = e2e::Generate(*c.stub, Request(v1::DRAFTER_MODEL, 0.0f, 0));
    ASSERT_TRUE(plain.status.ok() && spec.status.ok()) << c.Logs();
    EXPECT_EQ(spec.ids, plain.ids);
    for (uint64_t seed : {3u, 4u, 5u}) {
      const e2e::StreamResult s = e2e::Generate(*c.stub, Request(v1::DRAFTER_MODEL, 0.8f, seed));
      ASSERT_TRUE(s.status.ok()) << c.Logs();
      device_sampled.push_back(s.ids);
    }
    const std::string m = Scrape(c.target_metrics);
    EXPECT_EQ(Metric(m, "specserve_verify_location", {"location=\"cuda\""}), 1) << m;
    // O(K) per round: accepted, next token and K <= 16 flags, never the
    // [K + 1, vocab] logits rows.
    const double rounds = Metric(m, "specserve_verify_duration_seconds_count");
    const double bytes = Metric(m, "specserve_verify_bytes_to_host_total");
    EXPECT_GT(bytes, 0);
    EXPECT_LE(bytes, rounds * (8 + 16)) << bytes << " bytes in " << rounds << " rounds";
  }
  setenv("SPECSERVE_CUDA_VERIFY", "host", 1);
  Cluster host(OnCuda());
  unsetenv("SPECSERVE_CUDA_VERIFY");
  ASSERT_TRUE(host.ready) << host.Logs();
  int i = 0;
  for (uint64_t seed : {3u, 4u, 5u}) {
    const e2e::StreamResult s = e2e::Generate(*host.stub, Request(v1::DRAFTER_MODEL, 0.8f, seed));
    ASSERT_TRUE(s.status.ok()) << host.Logs();
    EXPECT_EQ(s.ids, device_sampled[i++]) << "seed " << seed;
  }
  EXPECT_EQ(Metric(Scrape(host.target_metrics), "specserve_verify_location", {"location=\"cpu\""}), 1);
}

}  // namespace
}  // namespace specserve
