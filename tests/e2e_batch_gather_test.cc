// The batch gather (rpc/session_service.h GatherLastPass, --batch-gather-ms)
// against the real target service: when a session the last pass served
// sends its next message a little after another session does, the next pass
// waits for it and holds both. Without the gather the
// early one runs alone at once and the late one alone after it: the split
// into alternating cohorts that halved the ~1B target's batches under load
// (docs/decisions/0012-batch-gather.md).
//
// The sessions are opened directly on the target, as the coordinator opens
// them, so the test decides when each answer is sent.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/e2e_harness.h"
#include "tests/e2e_requests.h"

namespace specserve {
namespace {

using e2e::failure::DirectSession;
using e2e::failure::DistinctPrompt;
using e2e::failure::ExpectTargetAnswer;
using e2e::failure::SendPlainRound;

// Target passes that held two sessions or more.
double SharedPasses(int metrics_port) {
  const std::string m = e2e::Scrape(metrics_port);
  return e2e::Metric(m, "specserve_batch_size_count") - e2e::Metric(m, "specserve_batch_size_bucket", {"le=\"1\""});
}

// Session `early` is open; `late` is opened with a long prompt, so the pass
// that prefills it is long (~0.1-0.3 s at one thread) and serves it alone.
// Then early's next round is sent at once and late's `delay` later. Returns
// the target's passes that held both.
double SharedPassesWhenOneAnswersLate(const std::string& gather_ms, std::chrono::milliseconds delay) {
  // Whole-prompt prefill (--prefill-chunk-tokens 0): late's prefill is one
  // long pass, whose length sets the gather's cap (half the last pass).
  e2e::Cluster c(e2e::failure::Options(
      false, {"--threads", "1", "--batch-gather-ms", gather_ms, "--prefill-chunk-tokens", "0"}));
  EXPECT_TRUE(c.ready) << c.Logs();
  if (!c.ready) return -1;
  const std::string addr = e2e::Loopback(c.target_port);
  DirectSession early(addr, DistinctPrompt(8, 1), 16);
  ExpectTargetAnswer(early, true);
  DirectSession late(addr, DistinctPrompt(960, 2), 16);
  ExpectTargetAnswer(late, true);
  EXPECT_EQ(SharedPasses(c.target_metrics), 0);
  SendPlainRound(early, 0);
  std::this_thread::sleep_for(delay);
  SendPlainRound(late, 0);
  ExpectTargetAnswer(early, false);
  ExpectTargetAnswer(late, false);
  const double shared = SharedPasses(c.target_metrics);
  EXPECT_TRUE(early.Close().ok()) << early.status.error_message();
  EXPECT_TRUE(late.Close().ok()) << late.status.error_message();
  EXPECT_TRUE(e2e::failure::ServiceIdle(c.target_metrics));
  return shared;
}

TEST(E2eBatchGatherTest, ASessionAnsweringAfterAnotherStillSharesItsPass) {
  // The window (150 ms) is capped at half the last pass; the late answer
  // comes 20 ms after the early one, well inside both.
  EXPECT_EQ(SharedPassesWhenOneAnswersLate("150", std::chrono::milliseconds(20)), 1);
}

TEST(E2eBatchGatherTest, WithoutTheGatherTheSessionsSplit) {
  // The early session's one-token pass (about a millisecond) is over before
  // the late answer arrives: two passes of one session each.
  EXPECT_EQ(SharedPassesWhenOneAnswersLate("0", std::chrono::milliseconds(20)), 0);
}

}  // namespace
}  // namespace specserve
