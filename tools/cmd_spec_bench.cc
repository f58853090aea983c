// `specserve spec-bench`: speculative decoding figures over a prompt file.
// For each target, temperature and drafter configuration it runs every
// prompt, then explains the acceptance it measured by teacher-forcing the
// draft and the target over the output at exactly the positions the loop
// compared (greedy: agreement; sampled: mean sum_x min(p(x), q(x))).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
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
#include "common/usable_cpus.h"
#include "coordinator/local_engines.h"
#include "tools/command_flags.h"
#include "tools/commands.h"
#include "tools/spec_bench_util.h"

namespace specserve::cli {
namespace {

struct Options {
  std::vector<std::string> targets, temperatures, ks;  // the comma-separated flags
  std::string draft, prompts, json;
  int64_t max_tokens = 0, limit = 0, threads = 0, lookup = 0;
  bool overlap = false;
  MatMulActivations activations = MatMulActivations::kInt8;
};

absl::StatusOr<Options> OptionsFromFlags(const CliArgs& args) {
  Options o;
  ASSIGN_OR_RETURN(o.max_tokens, args.Int("max-tokens", 1, 900));
  ASSIGN_OR_RETURN(o.limit, args.Int("limit", 1, 100000));
  ASSIGN_OR_RETURN(o.threads, ThreadsFromFlag(args.Str("threads"), UsableCpus()));
  ASSIGN_OR_RETURN(o.lookup, args.Int("lookup", 0, 16));
  o.targets = absl::StrSplit(args.Str("target"), ',', absl::SkipEmpty());
  o.temperatures = absl::StrSplit(args.Str("temperatures"), ',', absl::SkipEmpty());
  o.ks = absl::StrSplit(args.Str("ks"), ',', absl::SkipEmpty());
  o.draft = args.Str("draft");
  o.prompts = args.Str("prompts");
  if (args.Given("json")) o.json = args.Str("json");
  o.overlap = args.Bool("overlap");
  ASSIGN_OR_RETURN(o.activations, ParseMatMulActivations(args.Str("cpu-activations")));
  return o;
}

// The draft model, and the backend options of the targets. Sequential rounds
// share one pool of --threads; with --overlap the draft gets a core of its
// own and the speculative target the rest, and they run at once.
struct Draft {
  BackendOptions target_bo, spec_target_bo;
  std::unique_ptr<Model> model;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Tokenizer> tok;
};

absl::StatusOr<Draft> LoadDraft(const Options& o) {
  Draft d;
  ASSIGN_OR_RETURN(d.model, Model::Load(o.draft));
  d.target_bo.shared_pool = std::make_shared<ThreadPool>(static_cast<int>(o.threads));
  d.target_bo.cpu_activations = o.activations;
  BackendOptions draft_bo = d.target_bo;
  d.spec_target_bo = d.target_bo;
  if (o.overlap) {
    draft_bo.shared_pool = std::make_shared<ThreadPool>(1);
    d.spec_target_bo.shared_pool = std::make_shared<ThreadPool>(std::max<int>(1, static_cast<int>(o.threads) - 1));
  }
  ASSIGN_OR_RETURN(d.backend, MakeCpuBackend(*d.model, draft_bo));
  ASSIGN_OR_RETURN(d.tok, Tokenizer::FromGguf(*d.model->file));
  return d;
}

// One target model: its backend for the plain runs, its own one for the
// speculative runs with --overlap, and the prompts in its tokens.
struct Target {
  std::string name;
  std::unique_ptr<Model> model;
  std::unique_ptr<Backend> plain, overlap;
  std::vector<std::vector<TokenId>> prompts;

  Backend& spec() { return overlap ? *overlap : *plain; }
};

absl::StatusOr<Target> LoadTarget(const std::string& path, const Options& o, const Draft& draft) {
  Target t;
  ASSIGN_OR_RETURN(t.model, Model::Load(path));
  ASSIGN_OR_RETURN(t.plain, MakeCpuBackend(*t.model, draft.target_bo));
  if (o.overlap) {
    ASSIGN_OR_RETURN(t.overlap, MakeCpuBackend(*t.model, draft.spec_target_bo));
  }
  ASSIGN_OR_RETURN(auto tok, Tokenizer::FromGguf(*t.model->file));
  RETURN_IF_ERROR(CheckSameVocabulary(*draft.tok, *tok));
  ASSIGN_OR_RETURN(t.prompts, LoadPrompts(o.prompts, *tok, static_cast<int>(o.limit)));
  t.name = t.model->config.name.empty() ? path : t.model->config.name;
  return t;
}

// A drafter configuration: (kind, K, lookup).
struct Config {
  v1::Drafter kind;
  std::string k;
  int32_t lookup;

  const char* name() const { return kind == v1::DRAFTER_NGRAM ? "ngram" : lookup > 0 ? "lookup" : "model"; }
};

// The model drafter for each K, with prompt lookup too where asked (greedy
// drafts only), then the n-gram drafter.
std::vector<Config> Configs(const Options& o, float temperature) {
  std::vector<Config> configs;
  for (const std::string& k : o.ks) configs.push_back({v1::DRAFTER_MODEL, k, 0});
  if (o.lookup > 0 && temperature == 0) {
    for (const std::string& k : o.ks) configs.push_back({v1::DRAFTER_MODEL, k, static_cast<int32_t>(o.lookup)});
  }
  configs.push_back({v1::DRAFTER_NGRAM, "4", 0});
  return configs;
}

RunSetup SetupFor(const Config& c, const Options& o, float temperature) {
  RunSetup setup;
  setup.kind = c.kind;
  setup.k = c.k == "adaptive" ? KPolicy::Adaptive() : KPolicy::Fixed(std::stoi(c.k));
  setup.temperature = temperature;
  setup.max_tokens = static_cast<int32_t>(o.max_tokens);
  // Teacher forcing explains the model's own proposals, not looked-up ones.
  setup.explain = c.kind == v1::DRAFTER_MODEL && c.lookup == 0;
  setup.overlap = o.overlap && c.kind == v1::DRAFTER_MODEL;
  setup.lookup_min_ngram = c.lookup;
  return setup;
}

// accept: accepted / drafted. cmp-acc: accepted / compared (drafted up to each
// round's first miss); expect: what teacher forcing predicts for cmp-acc.
void PrintHeader() {
  std::printf("%-16s %4s %-6s %-8s %9s %9s %7s %7s %7s %7s %8s  %s\n", "target", "T", "drafter", "K", "plain t/s",
              "spec t/s", "speedup", "accept", "cmp-acc", "expect", "tok/pass", "per-position acceptance");
}

void PrintRow(const Target& t, float temperature, const Config& c, const BenchRun& plain, const BenchRun& r) {
  std::string pos;
  for (size_t i = 0; i < r.stats_pos_acc.size() && i < 8; ++i) {
    pos += absl::StrFormat("%s%.2f", i ? " " : "", r.stats_pos_acc[i]);
  }
  std::printf("%-16s %4.1f %-6s %-8s %9.0f %9.0f %6.2fx %7.3f %7.3f %7s %8.2f  %s\n", t.name.c_str(), temperature,
              c.name(), c.k.c_str(), plain.tokens_per_s(), r.tokens_per_s(), r.tokens_per_s() / plain.tokens_per_s(),
              r.acceptance(), r.compared_acceptance(),
              r.explained_n ? absl::StrFormat("%.3f", r.explained()).c_str() : "-", r.tokens_per_pass(), pos.c_str());
  std::fflush(stdout);
}

nlohmann::json RowJson(const Options& o, const Target& t, float temperature, const Config& c, const BenchRun& plain,
                       const BenchRun& r) {
  return {{"target", t.name}, {"drafter", c.name()}, {"k", c.k}, {"temperature", temperature},
          {"threads", o.threads}, {"cpu_activations", MatMulActivationsName(o.activations)}, {"prompts", t.prompts.size()}, {"max_tokens", o.max_tokens},
          {"tokens_per_s", r.tokens_per_s()}, {"plain_tokens_per_s", plain.tokens_per_s()},
          {"speedup", r.tokens_per_s() / plain.tokens_per_s()}, {"acceptance_rate", r.acceptance()},
          {"compared_acceptance", r.compared_acceptance()},
          {"expected_acceptance", r.explained_n ? nlohmann::json(r.explained()) : nlohmann::json()},
          {"expected_acceptance_full_draft_softmax",
           r.explained_n && temperature > 0 ? nlohmann::json(r.explained_full()) : nlohmann::json()},
          {"tokens_per_pass", r.tokens_per_pass()}, {"per_position_acceptance", r.stats_pos_acc},
          {"overlap", o.overlap}, {"ahead_hits", r.ahead_hits},
          {"draft_seconds", r.draft_s}, {"verify_seconds", r.verify_s}, {"total_seconds", r.total_s}};
}

// Plain decoding, then every drafter configuration, at one temperature: a
// printed row and a JSON object each.
absl::Status BenchTemperature(const Options& o, Target& t, Backend& draft, float temperature, nlohmann::json* out) {
  BenchRun plain;
  RunSetup plain_setup;
  plain_setup.temperature = temperature;
  plain_setup.max_tokens = static_cast<int32_t>(o.max_tokens);
  RETURN_IF_ERROR(RunConfig(*t.plain, nullptr, plain_setup, t.prompts, &plain));
  for (const Config& c : Configs(o, temperature)) {
    BenchRun r;
    RETURN_IF_ERROR(RunConfig(t.spec(), &draft, SetupFor(c, o, temperature), t.prompts, &r));
    PrintRow(t, temperature, c, plain, r);
    out->push_back(RowJson(o, t, temperature, c, plain, r));
  }
  return absl::OkStatus();
}

absl::Status Run(const CliArgs& args) {
  ASSIGN_OR_RETURN(const Options o, OptionsFromFlags(args));
  ASSIGN_OR_RETURN(Draft draft, LoadDraft(o));
  nlohmann::json out = nlohmann::json::array();
  PrintHeader();
  for (const std::string& target_path : o.targets) {
    if (!std::ifstream(target_path).good()) {
      std::printf("%s: not found, skipped\n", target_path.c_str());
      continue;
    }
    ASSIGN_OR_RETURN(Target target, LoadTarget(target_path, o, draft));
    for (const std::string& ts : o.temperatures) {
      RETURN_IF_ERROR(BenchTemperature(o, target, *draft.backend, std::stof(ts), &out));
    }
  }
  if (!o.json.empty()) std::ofstream(o.json) << out.dump(2) << "\n";
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
  args.Flag("threads", "auto", "CPU threads shared by the draft and the target (auto: the cores this process may use)");
  args.Flag("cpu-activations", "int8", "fp32 or int8 CPU matrix products for both models (common/matmul_activations.h)");
  args.Flag("temperatures", "0,1", "comma-separated temperatures");
  args.Flag("ks", "1,2,4,8,adaptive", "comma-separated K values for the model drafter");
  args.Flag("lookup", "0",
            "also run the model drafter with prompt lookup from this many matching tokens (greedy rows, drafter "
            "\"lookup\"; 0: off)");
  args.BoolFlag("overlap", "draft the next block on its own core while the target verifies");
  args.Flag("json", "", "also write one JSON object per configuration to this file");
  return RunCommand(args, argc, argv, "spec-bench", Run, {.name_in_flag_errors = false});
}

}  // namespace specserve::cli
