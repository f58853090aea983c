// `specserve bench`: prefill and decode speed of each model at 1 and 2
// threads, decoding both from an empty context and at a depth of several
// hundred tokens (where a verify pass actually runs). Beside decode speed it
// prints the weight bytes one token reads and the fraction of this machine's
// measured read bandwidth that decoding uses (1.0 is the memory-bound floor),
// and for int8 activations the arithmetic floor of one token: its
// multiply-adds at this machine's measured int8 dot peak (a pass of T tokens
// costs at least T times that).
// A benchmark, not a test.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "backends/make_backend.h"
#include "common/backend.h"
#include "common/cli_args.h"
#include "common/status_macros.h"
#include "common/weights.h"
#include "tools/command_flags.h"
#include "tools/commands.h"
#include "tools/dot_peak.h"
#include "tools/memory_traffic.h"

namespace specserve::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Row {
  std::string model;
  int threads;
  MatMulActivations activations;
  double prefill_tps, decode_tps, decode_deep_tps, verify9_deep_tps;
  std::vector<std::pair<int, double>> pass_ms;  // (tokens in the pass, ms) at depth
  int64_t bytes_per_token = 0;                  // weights one decode step reads
  double bandwidth_gbs = 0;                     // measured read bandwidth at `threads`
  int64_t macs_per_token = 0;                   // int8 multiply-adds of one token's matrices
  double dot_peak_gmacs = 0;                    // measured int8 dot peak at `threads` (int8 rows)
  // Fraction of the read bandwidth that decoding at depth uses.
  double bandwidth_fraction() const { return bytes_per_token * decode_deep_tps / 1e9 / bandwidth_gbs; }
  // One token's multiply-adds at the dot peak, ms (0 without a peak).
  double dot_floor_ms() const { return dot_peak_gmacs > 0 ? macs_per_token / dot_peak_gmacs / 1e6 : 0; }
};

constexpr int kPassSizes[] = {1, 2, 3, 5, 9, 17};

// Decodes `n` tokens one at a time from the current cache; tokens/s.
absl::StatusOr<double> DecodeSpeed(Backend& b, KvSeq& seq, int n) {
  std::vector<float> logits;
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    TokenId in[1] = {static_cast<TokenId>(100 + (i * 131) % 3000)};
    RETURN_IF_ERROR(b.Forward({ForwardSeq{&seq, in, 1}}, &logits));
  }
  return n / std::chrono::duration<double>(Clock::now() - t0).count();
}

absl::StatusOr<Row> Measure(const std::string& path, int threads, MatMulActivations activations, int prompt_len,
                            int depth, double bandwidth_gbs, double dot_peak_gmacs) {
  ASSIGN_OR_RETURN(auto model, Model::Load(path));
  BackendOptions o;
  o.threads = threads;
  o.cpu_activations = activations;
  ASSIGN_OR_RETURN(auto b, MakeCpuBackend(*model, o));
  Row r{model->config.name.empty() ? path : model->config.name, threads, activations, 0, 0, 0, 0, {}};
  r.bytes_per_token = WeightBytesPerToken(model->weights);
  r.bandwidth_gbs = bandwidth_gbs;
  r.macs_per_token = MatrixMacsPerToken(model->weights);
  if (activations == MatMulActivations::kInt8) r.dot_peak_gmacs = dot_peak_gmacs;
  std::vector<TokenId> prompt{1};
  for (int i = 1; i < std::max(prompt_len, depth); ++i) prompt.push_back(100 + (i * 37) % 3000);
  std::vector<float> logits;
  // Prefill (best of 3).
  for (int rep = 0; rep < 3; ++rep) {
    KvSeq s;
    std::vector<TokenId> p(prompt.begin(), prompt.begin() + prompt_len);
    const auto t0 = Clock::now();
    RETURN_IF_ERROR(b->Forward({ForwardSeq{&s, p, 1}}, &logits));
    r.prefill_tps = std::max(r.prefill_tps, prompt_len / std::chrono::duration<double>(Clock::now() - t0).count());
    b->kv_pool().Release(s);
  }
  {
    KvSeq s;
    std::vector<TokenId> bos{1};
    RETURN_IF_ERROR(b->Forward({ForwardSeq{&s, bos, 1}}, &logits));
    ASSIGN_OR_RETURN(r.decode_tps, DecodeSpeed(*b, s, 128));
    b->kv_pool().Release(s);
  }
  {
    KvSeq s;
    std::vector<TokenId> p(prompt.begin(), prompt.begin() + depth);
    RETURN_IF_ERROR(b->Forward({ForwardSeq{&s, p, 1}}, &logits));
    ASSIGN_OR_RETURN(r.decode_deep_tps, DecodeSpeed(*b, s, 64));
    // Verify passes of K + 1 tokens at the same depth, rolled back each time:
    // what a round costs the target as K grows.
    const int32_t base = s.length;
    for (int n : kPassSizes) {
      std::vector<TokenId> block(n, 500);
      const int reps = 24;
      double best = 1e9;
      for (int i = 0; i < reps; ++i) {
        const auto t0 = Clock::now();
        RETURN_IF_ERROR(b->Forward({ForwardSeq{&s, block, n}}, &logits));
        best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
        b->kv_pool().Truncate(s, base);
      }
      r.pass_ms.push_back({n, best * 1e3});
      if (n == 9) r.verify9_deep_tps = 1.0 / best;
    }
    b->kv_pool().Release(s);
  }
  return r;
}

}  // namespace

int Bench(int argc, char** argv) {
  CliArgs args("usage: specserve bench [--models A.gguf,B.gguf] [--json FILE]");
  args.Flag("models", "models/code-draft-1m.gguf,models/code-target-7m.gguf,../shared/models/code-target-14m.gguf",
            "comma-separated GGUF files (missing ones are skipped)");
  args.Flag("threads", "1,2", "comma-separated thread counts");
  args.Flag("cpu-activations", "int8", "comma-separated: fp32 and/or int8 (common/matmul_activations.h)");
  args.Flag("prompt-len", "256", "prefill length");
  args.Flag("depth", "430", "context depth for the deep decode and verify figures");
  args.Flag("json", "", "also write the results as JSON to this file");
  if (std::optional<int> done = ParseCommandFlags(args, argc, argv, "bench", {.name_in_flag_errors = false})) {
    return *done;
  }
  auto plen = args.Int("prompt-len", 1, 1000);
  auto depth = args.Int("depth", 1, 900);
  if (!plen.ok() || !depth.ok()) return std::fprintf(stderr, "bad --prompt-len or --depth\n"), 2;
  std::vector<MatMulActivations> activations;
  for (const std::string& a : std::vector<std::string>(absl::StrSplit(args.Str("cpu-activations"), ',', absl::SkipEmpty()))) {
    auto parsed = ParseMatMulActivations(a);
    if (!parsed.ok()) return std::fprintf(stderr, "%s\n", parsed.status().message().data()), 2;
    activations.push_back(*parsed);
  }
  std::vector<Row> rows;
  // Read bandwidth and int8 dot peak for each thread count, measured once.
  std::map<int, double> bandwidth, dot_peak;
  const bool int8 = std::find(activations.begin(), activations.end(), MatMulActivations::kInt8) != activations.end();
  for (const std::string& t : std::vector<std::string>(absl::StrSplit(args.Str("threads"), ',', absl::SkipEmpty()))) {
    const int n = std::stoi(t);
    if (n < 1 || n > 256) return std::fprintf(stderr, "bad --threads\n"), 2;
    if (!bandwidth.count(n)) bandwidth[n] = MeasureReadBandwidthGBs(n);
    std::printf("read bandwidth, %d thread(s): %.1f GB/s\n", n, bandwidth[n]);
    if (int8 && !dot_peak.count(n)) {
      const DotPeak p = MeasureInt8DotPeak(n);
      dot_peak[n] = p.gmacs_per_s;
      if (p.gmacs_per_s > 0) std::printf("int8 dot peak, %d thread(s): %.0f GMAC/s (%s)\n", n, p.gmacs_per_s, p.instruction.c_str());
    }
  }
  std::printf("%-22s %7s %5s %12s %12s %14s %9s %8s %11s %16s  %s\n", "model", "threads", "act", "prefill t/s",
              "decode t/s", "decode@depth", "MB/token", "of peak", "dots ms/tok", "verify9@depth/s",
              "pass ms at depth for 1,2,3,5,9,17 tokens (best of 24)");
  for (const std::string& path : std::vector<std::string>(absl::StrSplit(args.Str("models"), ',', absl::SkipEmpty()))) {
    if (!std::ifstream(path).good()) {
      std::printf("%-22s (not found, skipped)\n", path.c_str());
      continue;
    }
    for (const std::string& t : std::vector<std::string>(absl::StrSplit(args.Str("threads"), ',', absl::SkipEmpty())))
    for (MatMulActivations act : activations) {
      auto r = Measure(path, std::stoi(t), act, static_cast<int>(*plen), static_cast<int>(*depth), bandwidth[std::stoi(t)],
                       dot_peak[std::stoi(t)]);
      if (!r.ok()) return std::fprintf(stderr, "%s: %s\n", path.c_str(), r.status().ToString().c_str()), 1;
      std::string passes;
      for (auto [n, ms] : r->pass_ms) passes += absl::StrFormat(" %.3f", ms);
      const std::string dots = r->dot_floor_ms() > 0 ? absl::StrFormat("%.2f", r->dot_floor_ms()) : "-";
      std::printf("%-22s %7d %5s %12.0f %12.0f %14.0f %9.1f %8.2f %11s %16.0f  %s\n", r->model.c_str(), r->threads,
                  MatMulActivationsName(r->activations), r->prefill_tps, r->decode_tps, r->decode_deep_tps,
                  r->bytes_per_token / 1e6, r->bandwidth_fraction(), dots.c_str(), r->verify9_deep_tps, passes.c_str());
      rows.push_back(*r);
    }
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double peak_mib = ru.ru_maxrss / 1024.0;
  std::printf("peak resident memory: %.1f MiB\n", peak_mib);
  if (args.Given("json")) {
    nlohmann::json j = {{"peak_rss_mib", peak_mib}, {"depth", *depth}, {"prompt_len", *plen}, {"results", nlohmann::json::array()}};
    for (const Row& r : rows) {
      j["results"].push_back({{"model", r.model}, {"threads", r.threads},
                              {"cpu_activations", MatMulActivationsName(r.activations)}, {"prefill_tokens_per_s", r.prefill_tps},
                              {"decode_tokens_per_s", r.decode_tps}, {"decode_tokens_per_s_at_depth", r.decode_deep_tps},
                              {"verify9_passes_per_s_at_depth", r.verify9_deep_tps},
                              {"pass_ms_at_depth", r.pass_ms}, {"weight_bytes_per_token", r.bytes_per_token},
                              {"read_bandwidth_gb_per_s", r.bandwidth_gbs},
                              {"bandwidth_fraction_at_depth", r.bandwidth_fraction()},
                              {"matrix_macs_per_token", r.macs_per_token},
                              {"int8_dot_peak_gmac_per_s", r.dot_peak_gmacs},
                              {"dot_floor_ms_per_token", r.dot_floor_ms()}});
    }
    std::ofstream(args.Str("json")) << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace specserve::cli
