#include "tools/prefix_bench.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace specserve::cli {

absl::StatusOr<std::vector<std::vector<TokenId>>> PrefixBenchTexts(const std::vector<std::vector<TokenId>>& prompts,
                                                                   const PrefixBenchConfig& c) {
  if (c.prefix_tokens < 1 || c.suffix_tokens < 1 || c.pairs < 1) {
    return absl::InvalidArgumentError("serve-bench: --prefix-tokens, its suffix and pairs must be >= 1");
  }
  if (prompts.size() < static_cast<size_t>(c.pairs)) {
    return absl::InvalidArgumentError(absl::StrCat("serve-bench: ", c.pairs, " prefix pairs need as many prompts, got ",
                                                   prompts.size()));
  }
  const size_t need = static_cast<size_t>(c.prefix_tokens) + 2 * static_cast<size_t>(c.suffix_tokens);
  std::vector<std::vector<TokenId>> texts;
  for (int j = 0; j < c.pairs; ++j) {
    std::vector<TokenId> t = prompts[j];
    // Appended prompts lose their first token when it is the first prompt's
    // (BOS): one BOS, at the start.
    for (size_t i = j + 1; t.size() < need && i < prompts.size(); ++i) {
      const auto& p = prompts[i];
      const bool bos = !p.empty() && !t.empty() && p[0] == prompts[j][0];
      t.insert(t.end(), p.begin() + (bos ? 1 : 0), p.end());
    }
    if (t.size() < need) {
      return absl::InvalidArgumentError(absl::StrCat("serve-bench: the prompts from number ", j, " on hold ", t.size(),
                                                     " tokens, fewer than --prefix-tokens + 2 x ", c.suffix_tokens));
    }
    texts.push_back(std::move(t));
  }
  return texts;
}

absl::StatusOr<nlohmann::json> RunPrefixBench(const SendFn& send, const std::vector<std::vector<TokenId>>& prompts,
                                              const PrefixBenchConfig& c) {
  ASSIGN_OR_RETURN(const std::vector<std::vector<TokenId>> texts, PrefixBenchTexts(prompts, c));
  const std::string drafter = DrafterLabel(c.request);
  std::printf("%d pairs: a %d-token prefix with a %d-token question, cold then warm, one request at a time\n", c.pairs,
              c.prefix_tokens, c.suffix_tokens);
  std::printf("%4s %-9s %14s %14s %8s\n", "pair", "drafter", "cold TTFT ms", "warm TTFT ms", "speedup");
  nlohmann::json rows = nlohmann::json::array();
  std::vector<double> cold_ms, warm_ms;
  const auto n = static_cast<std::ptrdiff_t>(c.prefix_tokens);
  const auto s = static_cast<std::ptrdiff_t>(c.suffix_tokens);
  for (int j = 0; j < c.pairs; ++j) {
    const std::vector<TokenId>& t = texts[j];
    const std::vector<TokenId> cold(t.begin(), t.begin() + n + s);
    std::vector<TokenId> warm(t.begin(), t.begin() + n);
    warm.insert(warm.end(), t.begin() + n + s, t.begin() + n + 2 * s);
    RequestSample a = send(cold, c.request, 2 * j, LoadClock::now());
    if (!a.ok) return absl::UnavailableError("serve-bench: a cold request failed: " + a.error);
    RequestSample b = send(warm, c.request, 2 * j + 1, LoadClock::now());
    if (!b.ok) return absl::UnavailableError("serve-bench: a warm request failed: " + b.error);
    const double speedup = a.ttft_ms / std::max(1e-9, b.ttft_ms);
    std::printf("%4d %-9s %14.1f %14.1f %7.2fx\n", j, drafter.c_str(), a.ttft_ms, b.ttft_ms, speedup);
    std::fflush(stdout);
    rows.push_back({{"pair", j}, {"drafter", drafter}, {"where", c.request.where}, {"prefix_tokens", c.prefix_tokens},
                    {"suffix_tokens", c.suffix_tokens}, {"cold_ttft_ms", a.ttft_ms}, {"warm_ttft_ms", b.ttft_ms},
                    {"speedup", speedup}});
    cold_ms.push_back(a.ttft_ms);
    warm_ms.push_back(b.ttft_ms);
  }
  const double cold_p50 = ComputePercentiles(cold_ms).p50, warm_p50 = ComputePercentiles(warm_ms).p50;
  const double speedup = cold_p50 / std::max(1e-9, warm_p50);
  std::printf("%4s %-9s %14.1f %14.1f %7.2fx\n", "p50", drafter.c_str(), cold_p50, warm_p50, speedup);
  rows.push_back({{"pair", "median"}, {"drafter", drafter}, {"where", c.request.where},
                  {"prefix_tokens", c.prefix_tokens}, {"suffix_tokens", c.suffix_tokens}, {"cold_ttft_ms", cold_p50},
                  {"warm_ttft_ms", warm_p50}, {"speedup", speedup}});
  return rows;
}

}  // namespace specserve::cli
