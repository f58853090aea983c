// `specserve generate`: the local main job. Plain decoding on one model, or
// speculative decoding with a draft model or the n-gram drafter, in one
// process; text streams to stdout as tokens are committed.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "backends/make_backend.h"
#include "common/backend.h"
#include "common/cli_args.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"
#include "common/tokenizer.h"
#include "common/usable_cpus.h"
#include "common/weights.h"
#include "coordinator/drafters.h"
#include "coordinator/local_engines.h"
#include "spec/sampling.h"
#include "tools/command_flags.h"
#include "tools/commands.h"

namespace specserve::cli {
namespace {

// --model on --backend; with the CPU backend one pool of --threads, which the
// draft shares unless --overlap.
struct Target {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
  BackendOptions bo;
  std::shared_ptr<ThreadPool> shared_pool;
  std::unique_ptr<Backend> backend;
};

absl::StatusOr<Target> LoadTarget(const CliArgs& args) {
  Target t;
  ASSIGN_OR_RETURN(t.model, Model::Load(args.Str("model")));
  ASSIGN_OR_RETURN(t.tok, Tokenizer::FromGguf(*t.model->file));
  t.bo.kind = args.Str("backend");
  // With --overlap the draft runs on a thread of its own, beside the pool.
  const int reserved = args.Bool("overlap") && !args.Str("draft").empty() ? 1 : 0;
  ASSIGN_OR_RETURN(t.bo.threads, ThreadsFromFlag(args.Str("threads"), UsableCpus(), reserved));
  ASSIGN_OR_RETURN(t.bo.cpu_activations, ParseMatMulActivations(args.Str("cpu-activations")));
  if (t.bo.kind == "cpu") {
    t.shared_pool = std::make_shared<ThreadPool>(t.bo.threads);
    t.bo.shared_pool = t.shared_pool;
  }
  ASSIGN_OR_RETURN(t.backend, MakeBackend(*t.model, t.bo));
  return t;
}

// The drafter --drafter (or --draft) asks for, and the draft model's backend
// when that is the model drafter.
struct Draft {
  v1::Drafter kind = v1::DRAFTER_NONE;
  std::unique_ptr<Model> model;
  std::unique_ptr<Backend> backend;
};

absl::StatusOr<Draft> LoadDraft(const CliArgs& args, const Target& target) {
  Draft d;
  ASSIGN_OR_RETURN(v1::Drafter kind, ParseDrafter(args.Str("drafter")));
  if (!args.Given("drafter")) kind = args.Given("draft") ? v1::DRAFTER_MODEL : v1::DRAFTER_NONE;
  d.kind = kind;
  if (kind == v1::DRAFTER_MODEL) {
    if (!args.Given("draft")) return absl::InvalidArgumentError("--drafter model needs --draft D.gguf");
    ASSIGN_OR_RETURN(d.model, Model::Load(args.Str("draft")));
    ASSIGN_OR_RETURN(auto draft_tok, Tokenizer::FromGguf(*d.model->file));
    RETURN_IF_ERROR(CheckSameVocabulary(*draft_tok, *target.tok));
    BackendOptions draft_bo = target.bo;
    if (!args.Bool("overlap") && target.bo.kind == "cpu") {
      draft_bo.shared_pool = target.shared_pool;  // take turns on the same cores
    }
    ASSIGN_OR_RETURN(d.backend, MakeBackend(*d.model, draft_bo));
  }
  return d;
}

// --k: a fixed number of tokens drafted per round, or adaptive.
absl::StatusOr<KPolicy> KFromFlags(const CliArgs& args) {
  if (args.Str("k") == "adaptive") return KPolicy::Adaptive();
  ASSIGN_OR_RETURN(int64_t k, args.Int("k", 0, KPolicy::kMax));
  return KPolicy::Fixed(static_cast<int32_t>(k));
}

// The request: the prompt's ids, the target's sampling, and the draft's rule
// (--draft-temperature, else the target's temperature; --lookup).
absl::StatusOr<SessionSpec> SessionFromFlags(const CliArgs& args, const std::vector<TokenId>& ids,
                                             const SamplingParams& sp, int64_t max_tokens) {
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
  return spec;
}

// The summary on stderr after the text.
void PrintStats(const Target& target, v1::Drafter kind, size_t prompt_tokens, const LoopStats& st) {
  std::fprintf(stderr, "\n[%s on %s, drafter %s] %zu prompt tokens, %lld generated in %.3f s: %.0f tokens/s, "
               "time to first token %.1f ms\n",
               target.model->config.name.c_str(), target.backend->name().c_str(),
               DrafterName(kind).c_str(), prompt_tokens, static_cast<long long>(st.generated),
               st.total_seconds, st.generated / std::max(1e-9, st.total_seconds - st.first_token_seconds),
               st.first_token_seconds * 1e3);
  if (kind != v1::DRAFTER_NONE) {
    std::fprintf(stderr, "acceptance %.3f (%lld of %lld drafted), %.2f tokens per target pass over %lld rounds, "
                 "draft %.0f%% / verify %.0f%% of the time, last K %d, fallbacks %d, drafted ahead %lld\n",
                 st.acceptance_rate(), static_cast<long long>(st.accepted), static_cast<long long>(st.drafted),
                 st.tokens_per_pass(), static_cast<long long>(st.rounds), 100 * st.draft_seconds / st.total_seconds,
                 100 * st.verify_seconds / st.total_seconds, st.last_k, st.fallbacks,
                 static_cast<long long>(st.ahead_hits));
  }
}

absl::Status Run(const CliArgs& args) {
  ASSIGN_OR_RETURN(Target target, LoadTarget(args));
  ASSIGN_OR_RETURN(SamplingParams sp, SamplingFromFlags(args));
  ASSIGN_OR_RETURN(int64_t max_tokens, args.Int("max-tokens", 0, 1 << 20));
  RETURN_IF_ERROR(Validate(sp));

  const std::string prompt = PromptFromFlags(args);
  std::vector<TokenId> ids = target.tok->Encode(prompt, true);
  if (ids.empty()) return absl::InvalidArgumentError("empty prompt");
  const int32_t n_ctx = target.model->config.n_ctx;
  if (static_cast<int64_t>(ids.size()) + max_tokens > n_ctx) {
    max_tokens = std::max<int64_t>(0, n_ctx - static_cast<int64_t>(ids.size()));
  }

  ASSIGN_OR_RETURN(Draft draft, LoadDraft(args, target));
  const v1::Drafter kind = draft.kind;
  LoopOptions opts;
  opts.overlap = args.Bool("overlap") && kind == v1::DRAFTER_MODEL;
  ASSIGN_OR_RETURN(opts.k, KFromFlags(args));
  opts.stop_tokens = {target.tok->eos()};
  Detokenizer detok(*target.tok);
  for (TokenId id : ids) detok.Push(id);  // the prompt is echoed as typed; this only primes spacing
  opts.on_tokens = [&](absl::Span<const TokenId> committed) {
    for (TokenId id : committed) std::fputs(detok.Push(id).c_str(), stdout);
    std::fflush(stdout);
    return true;
  };
  ASSIGN_OR_RETURN(SessionSpec spec, SessionFromFlags(args, ids, sp, max_tokens));

  std::fputs(prompt.c_str(), stdout);
  std::fflush(stdout);
  ASSIGN_OR_RETURN(LoopStats st, GenerateInProcess(*target.backend, draft.backend.get(), kind, spec, opts));
  std::fputs(detok.Flush().c_str(), stdout);
  std::fputs("\n", stdout);
  PrintStats(target, kind, ids.size(), st);
  return absl::OkStatus();
}

}  // namespace

int Generate(int argc, char** argv) {
  CliArgs args("usage: specserve generate --model M.gguf [--prompt TEXT | < prompt.txt] [flags]");
  args.Flag("model", "models/code-target-7m.gguf", "GGUF model to generate with");
  AddPromptFlag(args);
  args.Flag("max-tokens", "128", "tokens to generate at most");
  AddSamplingFlags(args);
  args.Flag("threads", "auto", "CPU threads; auto: the cores this process may use (less one for an --overlap draft)");
  args.Flag("cpu-activations", "int8", "fp32 or int8 CPU matrix products (common/matmul_activations.h)");
  args.Flag("backend", "cpu", "cpu or cuda");
  args.Flag("draft", "", "draft model GGUF (same vocabulary as --model)");
  args.Flag("drafter", "none", "model, ngram or none (model when --draft is given)");
  args.Flag("k", "adaptive", "tokens drafted per round: adaptive (chosen every round from measured acceptance and costs) or 0..16");
  args.BoolFlag("overlap", "draft the next block on another thread while the target verifies");
  args.Flag("draft-temperature", "", "the draft's own temperature (default: the target's)");
  args.Flag("lookup", "0",
            "model drafter, greedy draft: propose a prompt-lookup continuation instead of drafting when the "
            "last N+ tokens occurred before (0: off)");
  return RunCommand(args, argc, argv, "generate", Run);
}

}  // namespace specserve::cli
