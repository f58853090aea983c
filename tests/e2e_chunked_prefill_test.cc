// Chunked prefill (--prefill-chunk-tokens, rpc/model_service.h
// SetPrefillChunk) against the real target service: while a session is past
// its prefill, a new session's long prompt is computed a chunk per pass, and
// the running session's rounds are answered between its chunks instead of
// after one pass as long as the whole prompt, which stretches their
// inter-token gaps (docs/decisions/0013-chunked-prefill.md). With nobody decoding, a prompt
// is prefilled in one pass.
//
// The sessions are opened directly on the target, as the coordinator opens
// them, so the test decides when each message is sent.
#include <atomic>
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
using Clock = std::chrono::steady_clock;

double Passes(int metrics_port) {
  return e2e::Metric(e2e::Scrape(metrics_port), "specserve_forward_duration_seconds_count");
}

// A session is open and past its prefill (idle between rounds); another
// opens with a 960-token prompt (959 to prefill). Returns the target's
// passes until it is opened.
double PassesToPrefillBesideADecodingSession(const std::string& chunk) {
  e2e::Cluster c(e2e::failure::Options(false, {"--threads", "1", "--prefill-chunk-tokens", chunk}));
  EXPECT_TRUE(c.ready) << c.Logs();
  if (!c.ready) return -1;
  const std::string addr = e2e::Loopback(c.target_port);
  DirectSession early(addr, DistinctPrompt(8, 1), 16);
  ExpectTargetAnswer(early, true);
  const double before = Passes(c.target_metrics);
  DirectSession late(addr, DistinctPrompt(960, 2), 16);
  ExpectTargetAnswer(late, true);
  const double passes = Passes(c.target_metrics) - before;
  // Both sessions go on as usual: the chunks left the prompt whole.
  SendPlainRound(early, 0);
  SendPlainRound(late, 0);
  ExpectTargetAnswer(early, false);
  ExpectTargetAnswer(late, false);
  EXPECT_TRUE(early.Close().ok()) << early.status.error_message();
  EXPECT_TRUE(late.Close().ok()) << late.status.error_message();
  EXPECT_TRUE(e2e::failure::ServiceIdle(c.target_metrics));
  return passes;
}

TEST(E2eChunkedPrefillTest, ALongPromptBesideADecodingSessionTakesAChunkPerPass) {
  EXPECT_EQ(PassesToPrefillBesideADecodingSession("64"), 15);  // ceil(959 / 64)
}

TEST(E2eChunkedPrefillTest, WithoutChunksTheWholePromptIsOnePass) {
  EXPECT_EQ(PassesToPrefillBesideADecodingSession("0"), 1);
}

TEST(E2eChunkedPrefillTest, APromptWithNobodyDecodingIsOnePass) {
  e2e::Cluster c(e2e::failure::Options(false, {"--threads", "1", "--prefill-chunk-tokens", "64"}));
  ASSERT_TRUE(c.ready) << c.Logs();
  const std::string addr = e2e::Loopback(c.target_port);
  const double before = Passes(c.target_metrics);
  DirectSession only(addr, DistinctPrompt(960, 3), 16);
  ExpectTargetAnswer(only, true);
  EXPECT_EQ(Passes(c.target_metrics) - before, 1);
  EXPECT_TRUE(only.Close().ok()) << only.status.error_message();
}

// The decoding session's round, sent just after the long prompt's open, is
// answered while the prompt is still being prefilled: between two of its
// 15 chunks, not after them all.
TEST(E2eChunkedPrefillTest, ARunningSessionIsAnsweredBetweenTheChunks) {
  e2e::Cluster c(e2e::failure::Options(false, {"--threads", "1", "--prefill-chunk-tokens", "64"}));
  ASSERT_TRUE(c.ready) << c.Logs();
  const std::string addr = e2e::Loopback(c.target_port);
  DirectSession early(addr, DistinctPrompt(8, 1), 16);
  ExpectTargetAnswer(early, true);
  DirectSession late(addr, DistinctPrompt(960, 2), 16);
  std::atomic<int64_t> late_opened_ns{0};
  std::thread reader([&] {
    v1::TargetResponse resp;
    if (late.Read(&resp) && resp.has_opened()) {
      late_opened_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
    }
  });
  // Rounds of the running session while the prompt is prefilled: each is
  // answered in the next pass, beside the next chunk.
  int answered_before_opened = 0;
  for (int64_t r = 0; r < 8; ++r) {
    SendPlainRound(early, r);
    ExpectTargetAnswer(early, false);
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
    if (late_opened_ns.load() == 0 || now < late_opened_ns.load()) ++answered_before_opened;
  }
  reader.join();
  EXPECT_NE(late_opened_ns.load(), 0);
  // Without chunks the prompt's one pass ends before the first answer, or
  // with it; a round per chunk answers most of the 8 before it.
  EXPECT_GE(answered_before_opened, 4);
  EXPECT_TRUE(early.Close().ok()) << early.status.error_message();
  EXPECT_TRUE(late.Close().ok()) << late.status.error_message();
  EXPECT_TRUE(e2e::failure::ServiceIdle(c.target_metrics));
}

}  // namespace
}  // namespace specserve
