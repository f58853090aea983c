// The repeated-prefix benchmark of `specserve serve-bench --prefix-tokens N`:
// how much a long prompt prefix, cached on both services (--prefix-cache,
// on by default), cuts the time to first token of the next request that
// starts with it.
//
// Pair j takes a text t_j of at least N + 2 S tokens (eval prompt j, with the
// following prompts appended when it is shorter) and sends, one at a time:
//   cold  t_j[0, N + S)                       nothing of it cached yet;
//   warm  t_j[0, N) ++ t_j[N + S, N + 2 S)    the same N-token prefix, a
//                                             different S-token question.
// Each pair's text starts at a different prompt, and a KV block is shared only
// by requests whose tokens up to it are the same, so every cold request is
// cold. Against another server
// (--openai-url) the same requests measure its own prompt caching.
// A benchmark, not a test: it prints a table and returns the rows as JSON.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "tools/load_bench.h"

namespace specserve::cli {

struct PrefixBenchConfig {
  int32_t prefix_tokens = 400;  // N
  int32_t suffix_tokens = 16;   // S
  int pairs = 4;
  LoadConfig request;           // max_tokens, temperature, drafter, k of every request
};

// The pairs' texts, built from `prompts` as above; fails when the prompts
// together are too short.
absl::StatusOr<std::vector<std::vector<TokenId>>> PrefixBenchTexts(const std::vector<std::vector<TokenId>>& prompts,
                                                                   const PrefixBenchConfig& config);

// Runs the pairs through `send`, prints one line per pair and a summary, and
// returns {pair, drafter, cold_ttft_ms, warm_ttft_ms, speedup} per pair plus
// a last row with pair "median".
absl::StatusOr<nlohmann::json> RunPrefixBench(const SendFn& send, const std::vector<std::vector<TokenId>>& prompts,
                                              const PrefixBenchConfig& config);

}  // namespace specserve::cli
