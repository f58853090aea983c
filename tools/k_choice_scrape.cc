#include "tools/k_choice_scrape.h"

#include <httplib.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "coordinator/k_policy.h"
#include "rpc/metrics_text.h"

namespace specserve::cli {

KChoiceCounts KChoiceCounts::Since(const KChoiceCounts& before) const {
  KChoiceCounts d;
  for (const auto& [reason, n] : rounds) {
    auto it = before.rounds.find(reason);
    const double delta = n - (it == before.rounds.end() ? 0 : it->second);
    if (delta > 0) d.rounds[reason] = delta;
  }
  d.gain_sum = gain_sum - before.gain_sum;
  d.gain_count = gain_count - before.gain_count;
  return d;
}

KChoiceCounts& KChoiceCounts::operator+=(const KChoiceCounts& other) {
  for (const auto& [reason, n] : other.rounds) rounds[reason] += n;
  gain_sum += other.gain_sum;
  gain_count += other.gain_count;
  return *this;
}

nlohmann::json KChoiceCounts::Json() const {
  nlohmann::json by_reason = nlohmann::json::object();
  for (const auto& [reason, n] : rounds) by_reason[reason] = n;
  return {{"rounds", by_reason},
          {"promised_gain_mean", gain_count > 0 ? nlohmann::json(gain_sum / gain_count) : nlohmann::json(nullptr)}};
}

std::string KChoiceCounts::Line() const {
  std::vector<std::string> parts;
  if (!rounds.empty()) {
    parts.push_back(absl::StrJoin(rounds, ", ", [](std::string* out, const auto& kv) {
      absl::StrAppend(out, kv.first, " ", static_cast<long long>(kv.second));
    }));
  }
  if (gain_count > 0) parts.push_back(absl::StrFormat("promised gain mean %.2f", gain_sum / gain_count));
  return absl::StrJoin(parts, "; ");
}

KChoiceCounts ParseKChoices(const std::string& text) {
  KChoiceCounts c;
  for (int i = 0; i < KPolicy::kReasons; ++i) {
    const std::string reason = KPolicy::ReasonName(static_cast<KPolicy::Reason>(i));
    const double n = rpc::SumSamples(text, "specserve_k_choices_total", {"reason=\"" + reason + "\""});
    if (n > 0) c.rounds[reason] = n;
  }
  c.gain_sum = std::max(0.0, rpc::SumSamples(text, "specserve_k_promised_gain_sum"));
  c.gain_count = std::max(0.0, rpc::SumSamples(text, "specserve_k_promised_gain_count"));
  return c;
}

absl::StatusOr<KChoiceCounts> ScrapeKChoices(const std::string& url) {
  if (!absl::StartsWith(url, "http://")) {
    return absl::InvalidArgumentError(absl::StrCat("--coordinator-metrics must be http://host:port, not '", url, "'"));
  }
  httplib::Client cli(url);
  cli.set_connection_timeout(5, 0);
  httplib::Result res = cli.Get("/metrics");
  if (!res) return absl::UnavailableError(absl::StrCat("GET ", url, "/metrics: ", httplib::to_string(res.error())));
  if (res->status != 200) return absl::UnavailableError(absl::StrCat("GET ", url, "/metrics: HTTP ", res->status));
  return ParseKChoices(res->body);
}

}  // namespace specserve::cli
