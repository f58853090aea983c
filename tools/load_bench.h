// The load generator of `specserve serve-bench --concurrency ...`: many
// clients at once against a running coordinator, closed loop (each client
// sends its next request when the last one ends) or open loop (Poisson
// arrivals at --request-rate, at most --concurrency in flight), and the
// latency percentiles operators compare servers by.
//
// Definitions (per request, from the client's side):
//   TTFT  time from the request's arrival (its scheduled time in open loop)
//         to the first streamed token;
//   ITL   inter-token latency: the gap between two streamed deltas, shared
//         evenly by the tokens the later one carries (a speculative round
//         delivers several tokens at once);
//   E2E   arrival to the final message.
// Throughput counts every generated token over the run's wall time; goodput
// only the tokens of requests that met both SLOs (--slo-ttft-ms, --slo-itl-ms
// on their p99 ITL).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "common/tokenizer.h"
#include "tools/k_choice_scrape.h"
#include "specserve/v1/generation.grpc.pb.h"

namespace specserve::cli {

struct LoadConfig {
  int concurrency = 1;
  double request_rate = 0;   // requests/s, Poisson; 0: closed loop
  double duration_s = 30;    // no request starts after this
  int32_t max_tokens = 64;
  float temperature = 0;
  v1::Drafter drafter = v1::DRAFTER_NONE;
  int32_t k = 0;             // -1: adaptive (with a drafter)
  double slo_ttft_ms = 2000;
  double slo_itl_ms = 200;
  bool progress = true;      // a line on stderr every few seconds
  std::string where = "services";  // the rows' `where`: "services", or "openai" (--openai-url)
  std::string drafter_label;       // overrides the rows' drafter name when set ("server")
};

using LoadClock = std::chrono::steady_clock;

// One request as the client saw it.
struct RequestSample {
  bool ok = false;
  std::string error;
  double ttft_ms = 0, e2e_ms = 0;
  // Each delta after the first as it came: the gap since the previous one
  // and the tokens it carried (serve-bench --samples-json).
  struct Gap {
    double ms = 0;
    int64_t tokens = 0;
  };
  std::vector<Gap> gaps;
  // The inter-token latencies: one entry per token after the first delta,
  // each of a delta's tokens sharing its gap.
  std::vector<double> ItlMs() const;
  int64_t tokens = 0, rounds = 0, drafted = 0, accepted = 0;
  // When the request was sent, from the start of its row (ms), and the
  // index of its prompt: to line requests up in time (--samples-json).
  double start_ms = 0;
  int64_t prompt = 0;

  // A streamed delta of `n` tokens arrived now: the first sets TTFT, a later
  // one adds its gap.
  void AddDelta(int64_t n, LoadClock::time_point arrival);

 private:
  LoadClock::time_point last_;
  bool started_ = false;
};

// Sends one request (prompt, the config's sampling, seed) that arrived at
// `arrival` and blocks until it ends; failures are in the sample.
using SendFn = std::function<RequestSample(const std::vector<TokenId>& prompt, const LoadConfig& config,
                                           int64_t seed, LoadClock::time_point arrival)>;

// Streams through the coordinator's gRPC API (Generation.Generate).
SendFn GrpcSender(v1::Generation::Stub& stub);

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0;
};

struct LoadResult {
  LoadConfig config;
  int64_t requests = 0, errors = 0, tokens = 0, good_tokens = 0;
  int64_t rounds = 0, drafted = 0, accepted = 0;
  double wall_s = 0;
  // tpot_ms: each request's time per output token after its first,
  // (E2E - TTFT) / (tokens - 1), as vLLM's benchmark reports it; ITL pools
  // every token's gap instead, so its p99 is set by the slowest rounds.
  Percentiles ttft_ms, itl_ms, e2e_ms, tpot_ms;
  std::string first_error;
  int repeats = 1;                     // slices merged into this row (MergeLoad)
  std::vector<RequestSample> samples;  // every request, for merging
  // With serve-bench --coordinator-metrics: why the coordinator's K policy
  // chose each round's K during this row (summed over its slices).
  KChoiceCounts k_choices;

  double throughput() const { return wall_s > 0 ? tokens / wall_s : 0; }
  double goodput() const { return wall_s > 0 ? good_tokens / wall_s : 0; }
  double acceptance() const { return drafted ? static_cast<double>(accepted) / drafted : 0; }
  double tokens_per_pass() const { return rounds ? static_cast<double>(tokens) / rounds : 0; }
};

// Nearest-rank percentiles of `v` (sorted in place); zeros when empty.
Percentiles ComputePercentiles(std::vector<double>& v);

// Runs the load: prompts are taken in turn (request i gets prompt i mod n and
// seed i). Fails only when the coordinator cannot be reached at all; failed
// requests are counted in `errors`.
absl::StatusOr<LoadResult> RunLoad(const SendFn& send, const std::vector<std::vector<TokenId>>& prompts,
                                   const LoadConfig& config);

// The figures of `samples` (requests of `config`) over `wall_s` seconds.
absl::StatusOr<LoadResult> SummarizeLoad(const LoadConfig& config, std::vector<RequestSample> samples, double wall_s);

// One row from runs of the same config (serve-bench --repeats: slices of a
// row's duration, alternating with the other drafters' slices so that a slow
// spell of a shared machine falls on every drafter): their requests pooled,
// their wall times added, the percentiles over all of them.
absl::StatusOr<LoadResult> MergeLoad(const std::vector<LoadResult>& parts);

// "none", "model/ad", "ngram/4", or the config's drafter_label.
std::string DrafterLabel(const LoadConfig& config);

// The table's header and one row per result; the row as a JSON object with
// concurrency, drafter ("none" for plain decoding), where ("services"),
// throughput_tokens_per_s and the *_p50_ms / *_p90_ms / *_p99_ms fields.
void PrintLoadHeader();
void PrintLoadRow(const LoadResult& r);
nlohmann::json LoadRowJson(const LoadResult& r);
// Every request of a row, one object each: its row's concurrency, drafter
// and temperature, TTFT, E2E, tokens, rounds, drafted, accepted and its
// deltas' gaps as [ms, tokens] pairs (an error instead when it failed).
nlohmann::json LoadSamplesJson(const LoadResult& r);

}  // namespace specserve::cli
