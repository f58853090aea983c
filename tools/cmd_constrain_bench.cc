// `specserve constrain-bench`: what structured output costs through the
// services. Every prompt runs four ways, in turn (so that a slow spell of a
// shared machine falls on all of them): plain and speculative (the model
// drafter, adaptive K or --k), each without and with --json-schema. The
// table gives decode tokens/s, acceptance and tokens per pass of each, and
// the constrained-to-unconstrained ratios; the goal of issue 48 is a
// constrained speculative ratio of at least 0.9 and acceptance no lower.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "common/cli_args.h"
#include "common/status_macros.h"
#include "common/tokenizer.h"
#include "tools/command_flags.h"
#include "tools/commands.h"
#include "tools/coordinator_client.h"
#include "tools/spec_bench_util.h"

namespace specserve::cli {
namespace {

struct Totals {
  double decode_tokens = 0, decode_seconds = 0;
  int64_t tokens = 0, rounds = 0, drafted = 0, accepted = 0, requests = 0, finished = 0;

  double tokens_per_s() const { return decode_seconds > 0 ? decode_tokens / decode_seconds : 0; }
  double acceptance() const { return drafted ? static_cast<double>(accepted) / drafted : 0; }
  double per_pass() const { return rounds ? static_cast<double>(tokens) / rounds : 0; }
};

// One request; its decode time excludes the first round (the prefill).
absl::Status RunOne(v1::Generation::Stub& stub, const std::vector<TokenId>& prompt, const v1::GenerateRequest& base,
                    Totals* t) {
  v1::GenerateRequest req = base;
  req.mutable_token_ids()->mutable_ids()->Add(prompt.begin(), prompt.end());
  int first_round_tokens = -1;
  ASSIGN_OR_RETURN(Streamed s, GenerateStreaming(stub, req, 600, [&](const v1::Delta& d) {
                     if (first_round_tokens < 0) first_round_tokens = d.token_ids_size();
                   }));
  const v1::GenerationStats& st = s.final.stats();
  t->decode_tokens += st.tokens() - std::max(0, first_round_tokens);
  t->decode_seconds += st.total_seconds() - st.time_to_first_token_seconds();
  t->tokens += st.tokens();
  t->rounds += st.rounds();
  t->drafted += st.drafted();
  t->accepted += st.accepted();
  ++t->requests;
  if (s.final.finish_reason() == "stop") ++t->finished;
  return absl::OkStatus();
}

absl::Status Run(const CliArgs& args) {
  ASSIGN_OR_RETURN(int64_t max_tokens, args.Int("max-tokens", 1, 900));
  ASSIGN_OR_RETURN(int64_t limit, args.Int("limit", 1, 100000));
  ASSIGN_OR_RETURN(int64_t repeats, args.Int("repeats", 1, 100));
  double temperature = 0;
  if (!absl::SimpleAtod(args.Str("temperature"), &temperature) || temperature < 0 || temperature > 2) {
    return absl::InvalidArgumentError("--temperature must be in [0, 2]");
  }
  std::ifstream f(args.Str("json-schema"));
  std::stringstream schema;
  schema << f.rdbuf();
  if (!f || schema.str().empty()) return absl::NotFoundError("cannot read --json-schema " + args.Str("json-schema"));
  ASSIGN_OR_RETURN(auto target_model, Model::Load(args.Str("target-model")));
  ASSIGN_OR_RETURN(auto tok, Tokenizer::FromGguf(*target_model->file));
  ASSIGN_OR_RETURN(auto prompts, LoadPrompts(args.Str("prompts"), *tok, static_cast<int>(limit)));
  auto stub = ConnectCoordinator(args.Str("coordinator"));

  // The four ways, in the order each prompt runs them.
  struct Way {
    const char* name;
    bool speculative, constrained;
    Totals t;
  };
  Way ways[] = {{"plain", false, false, {}}, {"speculative", true, false, {}},
                {"plain", false, true, {}}, {"speculative", true, true, {}}};
  for (int64_t rep = 0; rep < repeats; ++rep) {
    for (size_t i = 0; i < prompts.size(); ++i) {
      for (Way& w : ways) {
        v1::GenerateRequest req;
        req.set_max_tokens(static_cast<int32_t>(max_tokens));
        req.set_temperature(static_cast<float>(temperature));
        req.set_seed(i);
        req.set_drafter(w.speculative ? v1::DRAFTER_MODEL : v1::DRAFTER_NONE);
        if (!w.speculative) {
          req.set_k(0);
        } else if (args.Str("k") == "adaptive") {
          req.set_adaptive_k(true);
        } else {
          ASSIGN_OR_RETURN(int64_t k, args.Int("k", 1, 16));
          req.set_k(static_cast<int32_t>(k));
        }
        if (w.constrained) req.set_json_schema(schema.str());
        RETURN_IF_ERROR(RunOne(*stub, prompts[i], req, &w.t));
      }
    }
  }
  std::printf("%zu prompts x %lld repeats, max %lld tokens, T %.1f, K %s, schema %s\n", prompts.size(),
              static_cast<long long>(repeats), static_cast<long long>(max_tokens), temperature, args.Str("k").c_str(),
              args.Str("json-schema").c_str());
  std::printf("%-12s %-11s %9s %9s %7s %8s %9s\n", "drafting", "output", "tokens/s", "vs plain", "accept",
              "tok/pass", "finished");
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < 4; ++i) {
    const Way& w = ways[i];
    const double vs_plain = w.t.tokens_per_s() / std::max(1e-9, ways[i & 2].t.tokens_per_s());
    std::printf("%-12s %-11s %9.0f %8.2fx %7.3f %8.2f %5lld/%lld\n", w.name, w.constrained ? "json_schema" : "free",
                w.t.tokens_per_s(), vs_plain, w.t.acceptance(), w.t.per_pass(), static_cast<long long>(w.t.finished),
                static_cast<long long>(w.t.requests));
    out.push_back({{"drafting", w.name}, {"constrained", w.constrained}, {"tokens_per_s", w.t.tokens_per_s()},
                   {"speedup_vs_plain", vs_plain}, {"acceptance_rate", w.t.acceptance()},
                   {"tokens_per_pass", w.t.per_pass()}, {"finished", w.t.finished}, {"requests", w.t.requests}});
  }
  const double spec_ratio = ways[3].t.tokens_per_s() / std::max(1e-9, ways[1].t.tokens_per_s());
  const double plain_ratio = ways[2].t.tokens_per_s() / std::max(1e-9, ways[0].t.tokens_per_s());
  std::printf("constrained / free tokens/s: speculative %.2fx, plain %.2fx; acceptance %.3f vs %.3f\n", spec_ratio,
              plain_ratio, ways[3].t.acceptance(), ways[1].t.acceptance());
  out.push_back({{"constrained_over_free_speculative", spec_ratio}, {"constrained_over_free_plain", plain_ratio}});
  if (args.Given("json")) {
    std::ofstream j(args.Str("json"));
    j << out.dump(2) << "\n";
    if (!j) return absl::InternalError("cannot write " + args.Str("json"));
  }
  return absl::OkStatus();
}

}  // namespace

int ConstrainBench(int argc, char** argv) {
  CliArgs args("usage: specserve constrain-bench --coordinator HOST:PORT --json-schema FILE [flags]");
  args.Flag("coordinator", "127.0.0.1:50051", "a running coordinator with a draft service");
  args.Flag("json-schema", "tests/data/schemas/order_nested.json", "the JSON Schema the constrained requests follow");
  args.Flag("target-model", "models/code-target-7m.gguf", "the target's GGUF, for the prompts' tokens");
  args.Flag("prompts", "bench/prompts.jsonl", "JSON-lines file with a \"prompt\" field per line");
  args.Flag("limit", "8", "use the first N prompts");
  args.Flag("repeats", "1", "run the prompts this many times");
  args.Flag("max-tokens", "256", "new tokens per request at most");
  args.Flag("temperature", "0", "sampling temperature of every request");
  args.Flag("k", "adaptive", "the speculative requests' K: adaptive or 1..16");
  args.Flag("json", "", "also write the rows as JSON to this file");
  return RunCommand(args, argc, argv, "constrain-bench", Run);
}

}  // namespace specserve::cli
