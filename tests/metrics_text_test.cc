// rpc/metrics_text.h, and serve-bench's reading of the K policy's metrics
// (tools/k_choice_scrape.h), on exposition text as prometheus-cpp writes it.
#include "rpc/metrics_text.h"

#include <string>

#include "gtest/gtest.h"
#include "tools/k_choice_scrape.h"

namespace specserve {
namespace {

const std::string kText =
    "# HELP specserve_k_choices_total Rounds with a drafter by why\n"
    "# TYPE specserve_k_choices_total counter\n"
    "specserve_k_choices_total{reason=\"best\"} 12\n"
    "specserve_k_choices_total{reason=\"plain_margin\"} 340\n"
    "specserve_k_choices_total{reason=\"explore\"} 0\n"
    "specserve_k_choices_total_extra 5\n"
    "specserve_k_promised_gain_count 352\n"
    "specserve_k_promised_gain_sum 394.24\n"
    "specserve_k_promised_gain_bucket{le=\"1\"} 20\n"
    "specserve_requests_total{status=\"ok\"} 7 1700000000000\n";

TEST(MetricsText, SumsTheSamplesOfExactlyOneNameWhoseLabelsMatch) {
  EXPECT_EQ(rpc::SumSamples(kText, "specserve_k_choices_total"), 352);
  EXPECT_EQ(rpc::SumSamples(kText, "specserve_k_choices_total", {"reason=\"best\""}), 12);
  EXPECT_EQ(rpc::SumSamples(kText, "specserve_k_promised_gain_sum"), 394.24);
  // A timestamp after the value is not part of it.
  EXPECT_EQ(rpc::SumSamples(kText, "specserve_requests_total", {"status=\"ok\""}), 7);
  // No such sample: -1, not 0 (a counter at 0 is a sample).
  EXPECT_EQ(rpc::SumSamples(kText, "specserve_k_choices_total", {"reason=\"fixed\""}), -1);
  EXPECT_EQ(rpc::SumSamples(kText, "specserve_k_promised"), -1);
  EXPECT_EQ(rpc::SumSamples("", "x"), -1);
}

TEST(KChoiceScrape, CountsByReasonAndThePromisedGainBetweenTwoScrapes) {
  const cli::KChoiceCounts before = cli::ParseKChoices(
      "specserve_k_choices_total{reason=\"best\"} 2\n"
      "specserve_k_promised_gain_count 2\nspecserve_k_promised_gain_sum 2.5\n");
  const cli::KChoiceCounts after = cli::ParseKChoices(kText);
  ASSERT_EQ(after.rounds.size(), 2u);  // a reason at 0 is left out
  const cli::KChoiceCounts d = after.Since(before);
  EXPECT_EQ(d.rounds.at("best"), 10);
  EXPECT_EQ(d.rounds.at("plain_margin"), 340);
  EXPECT_NEAR(d.gain_sum / d.gain_count, (394.24 - 2.5) / 350, 1e-12);
  EXPECT_EQ(d.Line(), "best 10, plain_margin 340; promised gain mean 1.12");
  EXPECT_EQ(d.Json()["rounds"]["plain_margin"], 340);
  cli::KChoiceCounts sum = d;
  sum += d;
  EXPECT_EQ(sum.rounds.at("best"), 20);
  EXPECT_TRUE(cli::ParseKChoices("").empty());
  EXPECT_EQ(cli::ParseKChoices("").Json()["promised_gain_mean"], nullptr);
}

TEST(KChoiceScrape, AnUnreachableOrMalformedAddressIsAnError) {
  EXPECT_EQ(cli::ScrapeKChoices("127.0.0.1:1").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cli::ScrapeKChoices("http://127.0.0.1:1").status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace specserve
