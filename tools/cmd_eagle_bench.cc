// `specserve eagle-bench`: greedy self-speculation with an EAGLE head
// (backends/cpu_eagle.h) against plain greedy decoding on the same target,
// over a prompt file, in process. Checks every run's output against plain
// decoding token for token.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backends/cpu_eagle.h"
#include "backends/make_backend.h"
#include "common/cli_args.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"
#include "common/tokenizer.h"
#include "tools/command_flags.h"
#include "tools/commands.h"
#include "tools/spec_bench_util.h"

namespace specserve::cli {
namespace {

struct Totals {
  int64_t tokens = 0, passes = 0, drafted = 0, accepted = 0;
  double seconds = 0;
};

absl::Status Run(const CliArgs& args) {
  ASSIGN_OR_RETURN(const int64_t max_tokens, args.Int("max-tokens", 1, 900));
  ASSIGN_OR_RETURN(const int64_t limit, args.Int("limit", 1, 100000));
  ASSIGN_OR_RETURN(const int64_t threads, args.Int("threads", 1, 256));
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load(args.Str("target")));
  ASSIGN_OR_RETURN(std::unique_ptr<EagleHead> head, EagleHead::Load(args.Str("head"), *model));
  ASSIGN_OR_RETURN(auto tok, Tokenizer::FromGguf(*model->file));
  ASSIGN_OR_RETURN(const auto prompts, LoadPrompts(args.Str("prompts"), *tok, static_cast<int>(limit)));
  BackendOptions bo;
  bo.shared_pool = std::make_shared<ThreadPool>(static_cast<int>(threads));
  ASSIGN_OR_RETURN(bo.cpu_activations, ParseMatMulActivations(args.Str("cpu-activations")));
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, MakeCpuBackend(*model, bo));
  CpuEagleHead run(*head, *model, *bo.shared_pool);
  std::vector<int32_t> ks = {0};
  for (absl::string_view k : absl::StrSplit(args.Str("ks"), ',', absl::SkipEmpty())) {
    int32_t v = 0;
    if (!absl::SimpleAtoi(k, &v) || v < 1 || v > 16) return absl::InvalidArgumentError(absl::StrCat("bad K '", k, "'"));
    ks.push_back(v);
  }
  std::vector<std::vector<TokenId>> reference(prompts.size());
  std::printf("%-6s %9s %8s %8s %9s %8s\n", "K", "t/s", "speedup", "accept", "tok/pass", "tokens");
  double plain_tps = 0;
  for (int32_t k : ks) {
    Totals t;
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSIGN_OR_RETURN(EagleRunStats st, GreedySelfSpeculate(*backend, k ? &run : nullptr, prompts[i],
                                                             static_cast<int32_t>(max_tokens), k));
      if (k == 0) {
        reference[i] = st.tokens;
      } else if (st.tokens != reference[i]) {
        return absl::InternalError(absl::StrCat("K ", k, ", prompt ", i, ": output differs from plain decoding"));
      }
      t.tokens += static_cast<int64_t>(st.tokens.size());
      t.passes += st.target_passes;
      t.drafted += st.drafted;
      t.accepted += st.accepted;
      t.seconds += st.decode_seconds;
    }
    const double tps = t.tokens / t.seconds;
    if (k == 0) plain_tps = tps;
    std::printf("%-6s %9.0f %7.2fx %8.3f %9.2f %8lld\n", k ? absl::StrCat("eagle ", k).c_str() : "plain", tps,
                tps / plain_tps, t.drafted ? static_cast<double>(t.accepted) / t.drafted : 0.0,
                static_cast<double>(t.tokens) / t.passes, static_cast<long long>(t.tokens));
    std::fflush(stdout);
  }
  return absl::OkStatus();
}

}  // namespace

int EagleBench(int argc, char** argv) {
  CliArgs args("usage: specserve eagle-bench --target T.gguf --head H.gguf [--prompts FILE] [flags]");
  args.Flag("target", "models/code-target-7m.gguf", "target model");
  args.Flag("head", "models/code-target-7m-eagle.gguf", "EAGLE head trained for the target");
  args.Flag("prompts", "bench/prompts.jsonl", "JSON-lines file with a \"prompt\" field per line");
  args.Flag("limit", "8", "use the first N prompts");
  args.Flag("max-tokens", "256", "new tokens per prompt");
  args.Flag("threads", "1", "CPU threads");
  args.Flag("cpu-activations", "int8", "fp32 or int8 CPU matrix products for the target");
  args.Flag("ks", "1,2,4", "comma-separated K values");
  return RunCommand(args, argc, argv, "eagle-bench", Run);
}

}  // namespace specserve::cli
