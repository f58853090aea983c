// `specserve generate`: the local main job. Plain decoding on one model, or
// speculative decoding with a draft model or the n-gram drafter, in one
// process; text streams to stdout as tokens are committed.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "backends/make_backend.h"
#include "common/backend.h"
#include "common/cli_args.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"
#include "common/tokenizer.h"
#include "common/weights.h"
#include "coordinator/local_engines.h"
#include "spec/sampling.h"
#include "tools/commands.h"

namespace specserve::cli {
namespace {

constexpr const char* kDrafterNames[] = {"model", "ngram", "none"};

absl::Status Run(const CliArgs& args) {
  ASSIGN_OR_RETURN(auto model, Model::Load(args.Str("model")));
  ASSIGN_OR_RETURN(auto tok, Tokenizer::FromGguf(*model->file));
  BackendOptions bo;
  bo.kind = args.Str("backend");
  ASSIGN_OR_RETURN(bo.threads, args.Int("threads", 1, 256));
  std::shared_ptr<ThreadPool> shared_pool;
  if (bo.kind == "cpu") {
    shared_pool = std::make_shared<ThreadPool>(bo.threads);
    bo.shared_pool = shared_pool;
  }
  ASSIGN_OR_RETURN(auto backend, MakeBackend(*model, bo));
  SamplingParams sp;
  ASSIGN_OR_RETURN(double temp, args.Double("temperature", 0, 100));
  ASSIGN_OR_RETURN(sp.top_k, args.Int("top-k", 0, 1 << 30));
  ASSIGN_OR_RETURN(double top_p, args.Double("top-p", 0, 1));
  ASSIGN_OR_RETURN(int64_t seed, args.Int("seed", 0, INT64_MAX));
  ASSIGN_OR_RETURN(int64_t max_tokens, args.Int("max-tokens", 0, 1 << 20));
  sp.temperature = static_cast<float>(temp);
  sp.top_p = static_cast<float>(top_p);
  sp.seed = static_cast<uint64_t>(seed);
  RETURN_IF_ERROR(Validate(sp));

  std::string prompt = args.Str("prompt");
  if (!args.Given("prompt")) {
    prompt.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  std::vector<TokenId> ids = tok->Encode(prompt, true);
  if (ids.empty()) return absl::InvalidArgumentError("empty prompt");
  const int32_t n_ctx = model->config.n_ctx;
  if (static_cast<int64_t>(ids.size()) + max_tokens > n_ctx) {
    max_tokens = std::max<int64_t>(0, n_ctx - static_cast<int64_t>(ids.size()));
  }

  std::unique_ptr<Model> draft_model;
  std::unique_ptr<Backend> draft_backend;
  ASSIGN_OR_RETURN(DrafterKind kind, ParseDrafterKind(args.Str("drafter")));
  if (!args.Given("drafter")) kind = args.Given("draft") ? DrafterKind::kModel : DrafterKind::kNone;
  if (kind == DrafterKind::kModel) {
    if (!args.Given("draft")) return absl::InvalidArgumentError("--drafter model needs --draft D.gguf");
    ASSIGN_OR_RETURN(draft_model, Model::Load(args.Str("draft")));
    ASSIGN_OR_RETURN(auto draft_tok, Tokenizer::FromGguf(*draft_model->file));
    RETURN_IF_ERROR(CheckSameVocabulary(*draft_tok, *tok));
    BackendOptions draft_bo = bo;
    if (!args.Bool("overlap") && bo.kind == "cpu") draft_bo.shared_pool = shared_pool;  // take turns on the same cores
    ASSIGN_OR_RETURN(draft_backend, MakeBackend(*draft_model, draft_bo));
  }
  LoopOptions opts;
  opts.overlap = args.Bool("overlap") && kind == DrafterKind::kModel;
  if (args.Str("k") == "adaptive") {
    opts.k = KPolicy::Adaptive();
  } else {
    ASSIGN_OR_RETURN(int64_t k, args.Int("k", 0, KPolicy::kMax));
    opts.k = KPolicy::Fixed(static_cast<int32_t>(k));
  }
  opts.stop_tokens = {tok->eos()};
  Detokenizer detok(*tok);
  for (TokenId id : ids) detok.Push(id);  // the prompt is echoed as typed; this only primes spacing
  opts.on_tokens = [&](absl::Span<const TokenId> committed) {
    for (TokenId id : committed) std::fputs(detok.Push(id).c_str(), stdout);
    std::fflush(stdout);
    return true;
  };
  SessionSpec spec;
  spec.prompt = ids;
  spec.target = sp;
  spec.max_new_tokens = static_cast<int32_t>(max_tokens);
  spec.draft.temperature = sp.temperature;
  ASSIGN_OR_RETURN(int64_t lookup, args.Int("lookup", 0, 16));
  spec.draft.lookup_min_ngram = static_cast<int32_t>(lookup);
  if (args.Given("draft-temperature")) {
    ASSIGN_OR_RETURN(double draft_temp, args.Double("draft-temperature", 0, 100));
    spec.draft.temperature = static_cast<float>(draft_temp);
  }

  std::fputs(prompt.c_str(), stdout);
  std::fflush(stdout);
  ASSIGN_OR_RETURN(LoopStats st, GenerateInProcess(*backend, draft_backend.get(), kind, spec, opts));
  std::fputs(detok.Flush().c_str(), stdout);
  std::fputs("\n", stdout);
  std::fprintf(stderr, "\n[%s on %s, drafter %s] %zu prompt tokens, %lld generated in %.3f s: %.0f tokens/s, "
               "time to first token %.1f ms\n",
               model->config.name.c_str(), backend->name().c_str(), kDrafterNames[static_cast<int>(kind)], ids.size(),
               static_cast<long long>(st.generated), st.total_seconds,
               st.generated / std::max(1e-9, st.total_seconds - st.first_token_seconds) ,
               st.first_token_seconds * 1e3);
  if (kind != DrafterKind::kNone) {
    std::fprintf(stderr, "acceptance %.3f (%lld of %lld drafted), %.2f tokens per target pass over %lld rounds, "
                 "draft %.0f%% / verify %.0f%% of the time, last K %d, fallbacks %d, drafted ahead %lld\n",
                 st.acceptance_rate(), static_cast<long long>(st.accepted), static_cast<long long>(st.drafted),
                 st.tokens_per_pass(), static_cast<long long>(st.rounds), 100 * st.draft_seconds / st.total_seconds,
                 100 * st.verify_seconds / st.total_seconds, st.last_k, st.fallbacks,
                 static_cast<long long>(st.ahead_hits));
  }
  return absl::OkStatus();
}

}  // namespace

int Generate(int argc, char** argv) {
  CliArgs args("usage: specserve generate --model M.gguf [--prompt TEXT | < prompt.txt] [flags]");
  args.Flag("model", "models/code-target-7m.gguf", "GGUF model to generate with");
  args.Flag("prompt", "", "prompt text (read from stdin when absent)");
  args.Flag("max-tokens", "128", "tokens to generate at most");
  args.Flag("temperature", "0", "sampling temperature; 0 is greedy");
  args.Flag("top-k", "0", "keep the k most likely tokens (0: off)");
  args.Flag("top-p", "1", "nucleus sampling mass (1: off)");
  args.Flag("seed", "0", "random seed (same seed, same output)");
  args.Flag("threads", "1", "CPU threads");
  args.Flag("backend", "cpu", "cpu or cuda");
  args.Flag("draft", "", "draft model GGUF (same vocabulary as --model)");
  args.Flag("drafter", "none", "model, ngram or none (model when --draft is given)");
  args.Flag("k", "4", "tokens drafted per round (0..16) or 'adaptive'");
  args.BoolFlag("overlap", "draft the next block on another thread while the target verifies");
  args.Flag("draft-temperature", "", "the draft's own temperature (default: the target's)");
  args.Flag("lookup", "0",
            "model drafter, greedy draft: propose a prompt-lookup continuation instead of drafting when the "
            "last N+ tokens occurred before (0: off)");
  if (auto s = args.Parse(argc, argv, 2); !s.ok()) {
    std::fprintf(stderr, "specserve generate: %s\n", s.ToString().c_str());
    return 2;
  }
  if (args.help()) return std::puts(args.HelpText().c_str()), 0;
  if (auto s = Run(args); !s.ok()) {
    std::fprintf(stderr, "specserve generate: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace specserve::cli
