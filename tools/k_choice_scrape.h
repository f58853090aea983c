// What the coordinator's adaptive K chose during a stretch of load, read
// from its /metrics (serve-bench --coordinator-metrics): the rounds by the
// policy's reason (specserve_k_choices_total{reason}) and the mean gain it
// predicted for drafting over plain decoding (specserve_k_promised_gain).
// A serve-bench row then says why speculation was on or off at its load.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace specserve::cli {

struct KChoiceCounts {
  std::map<std::string, double> rounds;  // by reason; reasons with no rounds left out
  double gain_sum = 0, gain_count = 0;

  bool empty() const { return rounds.empty() && gain_count == 0; }
  // The counts since `before` (a scrape of the same coordinator).
  KChoiceCounts Since(const KChoiceCounts& before) const;
  KChoiceCounts& operator+=(const KChoiceCounts& other);
  // {"rounds": {"best": 12, ...}, "promised_gain_mean": 1.12 (null without one)}
  nlohmann::json Json() const;
  // "best 12, plain_margin 340; promised gain mean 1.12"
  std::string Line() const;
};

// The counts in a text exposition.
KChoiceCounts ParseKChoices(const std::string& metrics_text);
// GET `url`/metrics (url: http://host:port of the coordinator's metrics).
absl::StatusOr<KChoiceCounts> ScrapeKChoices(const std::string& url);

}  // namespace specserve::cli
