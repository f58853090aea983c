// `specserve spec-bench`: speculative decoding figures over a prompt file.
// For each target, temperature and drafter configuration it runs every
// prompt, then explains the acceptance it measured by teacher-forcing the
// draft and the target over the output at exactly the positions the loop
// compared (greedy: agreement; sampled: mean sum_x min(p(x), q(x))).
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "backends/make_backend.h"
#include "common/cli_args.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"
#include "common/tokenizer.h"
#include "coordinator/local_engines.h"
#include "tools/commands.h"
#include "tools/spec_bench_util.h"

namespace specserve::cli {
namespace {

absl::Status Run(const CliArgs& args) {
  ASSIGN_OR_RETURN(int64_t max_tokens, args.Int("max-tokens", 1, 900));
  ASSIGN_OR_RETURN(int64_t limit, args.Int("limit", 1, 100000));
  ASSIGN_OR_RETURN(int64_t threads, args.Int("threads", 1, 64));
  ASSIGN_OR_RETURN(int64_t lookup, args.Int("lookup", 0, 16));
  ASSIGN_OR_RETURN(auto draft_model, Model::Load(args.Str("draft")));
  auto pool = std::make_shared<ThreadPool>(static_cast<int>(threads));
  BackendOptions bo;
  bo.shared_pool = pool;
  // Sequential rounds share one pool of `threads`; with --overlap the draft
  // gets a core of its own and the target the rest, and they run at once.
  const bool overlap = args.Bool("overlap");
  BackendOptions draft_bo = bo, spec_target_bo = bo;
  if (overlap) {
    draft_bo.shared_pool = std::make_shared<ThreadPool>(1);
    spec_target_bo.shared_pool = std::make_shared<ThreadPool>(std::max<int>(1, static_cast<int>(threads) - 1));
  }
  ASSIGN_OR_RETURN(auto draft, MakeCpuBackend(*draft_model, draft_bo));
  ASSIGN_OR_RETURN(auto draft_tok, Tokenizer::FromGguf(*draft_model->file));
  std::vector<std::string> temps = absl::StrSplit(args.Str("temperatures"), ',', absl::SkipEmpty());
  std::vector<std::string> ks = absl::StrSplit(args.Str("ks"), ',', absl::SkipEmpty());
  nlohmann::json out = nlohmann::json::array();
  // accept: accepted / drafted. cmp-acc: accepted / compared (drafted up to each
  // round's first miss); expect: what teacher forcing predicts for cmp-acc.
  std::printf("%-16s %4s %-6s %-8s %9s %9s %7s %7s %7s %7s %8s  %s\n", "target", "T", "drafter", "K", "plain t/s",
              "spec t/s", "speedup", "accept", "cmp-acc", "expect", "tok/pass", "per-position acceptance");
  for (const std::string& target_path : std::vector<std::string>(absl::StrSplit(args.Str("target"), ',', absl::SkipEmpty()))) {
    if (!std::ifstream(target_path).good()) {
      std::printf("%s: not found, skipped\n", target_path.c_str());
      continue;
    }
    ASSIGN_OR_RETURN(auto target_model, Model::Load(target_path));
    ASSIGN_OR_RETURN(auto target, MakeCpuBackend(*target_model, bo));
    std::unique_ptr<Backend> overlap_target;
    if (overlap) {
      ASSIGN_OR_RETURN(overlap_target, MakeCpuBackend(*target_model, spec_target_bo));
    }
    Backend& spec_target = overlap ? *overlap_target : *target;
    ASSIGN_OR_RETURN(auto tok, Tokenizer::FromGguf(*target_model->file));
    RETURN_IF_ERROR(CheckSameVocabulary(*draft_tok, *tok));
    ASSIGN_OR_RETURN(auto prompts, LoadPrompts(args.Str("prompts"), *tok, static_cast<int>(limit)));
    const std::string tname = target_model->config.name.empty() ? target_path : target_model->config.name;
    for (const std::string& ts : temps) {
      const float temperature = std::stof(ts);
      BenchRun plain;
      RunSetup plain_setup;
      plain_setup.temperature = temperature;
      plain_setup.max_tokens = static_cast<int32_t>(max_tokens);
      RETURN_IF_ERROR(RunConfig(*target, nullptr, plain_setup, prompts, &plain));
      // (kind, K, lookup): the model drafter for each K, with prompt lookup
      // too where asked (greedy drafts only), then the n-gram drafter.
      struct Config {
        DrafterKind kind;
        std::string k;
        int32_t lookup;
      };
      std::vector<Config> configs;
      for (const std::string& k : ks) configs.push_back({DrafterKind::kModel, k, 0});
      if (lookup > 0 && temperature == 0) {
        for (const std::string& k : ks) configs.push_back({DrafterKind::kModel, k, static_cast<int32_t>(lookup)});
      }
      configs.push_back({DrafterKind::kNgram, "4", 0});
      for (const Config& c : configs) {
        const DrafterKind kind = c.kind;
        const std::string& kstr = c.k;
        RunSetup setup;
        setup.kind = kind;
        setup.k = kstr == "adaptive" ? KPolicy::Adaptive() : KPolicy::Fixed(std::stoi(kstr));
        setup.temperature = temperature;
        setup.max_tokens = static_cast<int32_t>(max_tokens);
        // Teacher forcing explains the model's own proposals, not looked-up ones.
        setup.explain = kind == DrafterKind::kModel && c.lookup == 0;
        setup.overlap = overlap && kind == DrafterKind::kModel;
        setup.lookup_min_ngram = c.lookup;
        BenchRun r;
        RETURN_IF_ERROR(RunConfig(spec_target, draft.get(), setup, prompts, &r));
        const char* dname = kind == DrafterKind::kNgram ? "ngram" : c.lookup > 0 ? "lookup" : "model";
        std::string pos;
        for (size_t i = 0; i < r.stats_pos_acc.size() && i < 8; ++i) {
          pos += absl::StrFormat("%s%.2f", i ? " " : "", r.stats_pos_acc[i]);
        }
        std::printf("%-16s %4.1f %-6s %-8s %9.0f %9.0f %6.2fx %7.3f %7.3f %7s %8.2f  %s\n", tname.c_str(), temperature,
                    dname, kstr.c_str(), plain.tokens_per_s(), r.tokens_per_s(),
                    r.tokens_per_s() / plain.tokens_per_s(), r.acceptance(), r.compared_acceptance(),
                    r.explained_n ? absl::StrFormat("%.3f", r.explained()).c_str() : "-", r.tokens_per_pass(),
                    pos.c_str());
        std::fflush(stdout);
        out.push_back({{"target", tname}, {"drafter", dname}, {"k", kstr}, {"temperature", temperature},
                       {"threads", threads}, {"prompts", prompts.size()}, {"max_tokens", max_tokens},
                       {"tokens_per_s", r.tokens_per_s()}, {"plain_tokens_per_s", plain.tokens_per_s()},
                       {"speedup", r.tokens_per_s() / plain.tokens_per_s()}, {"acceptance_rate", r.acceptance()},
                       {"compared_acceptance", r.compared_acceptance()},
                       {"expected_acceptance", r.explained_n ? nlohmann::json(r.explained()) : nlohmann::json()},
                       {"expected_acceptance_full_draft_softmax",
                        r.explained_n && temperature > 0 ? nlohmann::json(r.explained_full()) : nlohmann::json()},
                       {"tokens_per_pass", r.tokens_per_pass()}, {"per_position_acceptance", r.stats_pos_acc},
                       {"overlap", overlap}, {"ahead_hits", r.ahead_hits},
                       {"draft_seconds", r.draft_s}, {"verify_seconds", r.verify_s}, {"total_seconds", r.total_s}});
      }
    }
  }
  if (args.Given("json")) std::ofstream(args.Str("json")) << out.dump(2) << "\n";
  return absl::OkStatus();
}

}  // namespace

int SpecBench(int argc, char** argv) {
  CliArgs args("usage: specserve spec-bench --target T.gguf[,T2.gguf] --draft D.gguf [--prompts FILE] [flags]");
  args.Flag("target", "models/code-target-7m.gguf,../shared/models/code-target-14m.gguf",
            "comma-separated target models (missing ones are skipped)");
  args.Flag("draft", "models/code-draft-1m.gguf", "draft model");
  args.Flag("prompts", "bench/prompts.jsonl", "JSON-lines file with a \"prompt\" field per line");
  args.Flag("limit", "8", "use the first N prompts");
  args.Flag("max-tokens", "256", "new tokens per prompt");
  args.Flag("threads", "1", "CPU threads shared by the draft and the target");
  args.Flag("temperatures", "0,1", "comma-separated temperatures");
  args.Flag("ks", "1,2,4,8,adaptive", "comma-separated K values for the model drafter");
  args.Flag("lookup", "0",
            "also run the model drafter with prompt lookup from this many matching tokens (greedy rows, drafter "
            "\"lookup\"; 0: off)");
  args.BoolFlag("overlap", "draft the next block on its own core while the target verifies");
  args.Flag("json", "", "also write one JSON object per configuration to this file");
  if (auto s = args.Parse(argc, argv, 2); !s.ok()) return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 2;
  if (args.help()) return std::puts(args.HelpText().c_str()), 0;
  if (auto s = Run(args); !s.ok()) {
    std::fprintf(stderr, "specserve spec-bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace specserve::cli
