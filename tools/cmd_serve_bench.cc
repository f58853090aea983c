// `specserve serve-bench`: the three-process deployment against plain
// decoding through the same services and against the in-process loop on the
// same model files. For each temperature it sends every prompt (as token ids)
// to a running coordinator with the model drafter and with none, runs the
// same prompts in process, and prints decode tokens/s, the speedups, the
// acceptance and where the rounds' time went (draft, verify, network).
// With --concurrency it runs load instead (tools/load_bench.h): many clients
// at once, with latency percentiles, a row per drafter of --drafters; with --prefix-tokens, the time to first
// token of a request whose long prefix is cached (tools/prefix_bench.h).
// A benchmark, not a test: it prints a table and, with --json, JSON.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backends/make_backend.h"
#include "common/cli_args.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"
#include "common/usable_cpus.h"
#include "rpc/status_convert.h"
#include "tools/command_flags.h"
#include "tools/commands.h"
#include "tools/coordinator_client.h"
#include "tools/load_bench.h"
#include "tools/openai_sender.h"
#include "tools/prefix_bench.h"
#include "tools/spec_bench_util.h"

namespace specserve::cli {
namespace {

struct Row {
  std::string where, drafter;
  double temperature = 0;
  int32_t k = 0;  // -1: adaptive
  double decode_tokens = 0, decode_seconds = 0;
  int64_t tokens = 0, rounds = 0, drafted = 0, accepted = 0;
  double draft_s = 0, verify_s = 0, network_s = 0;

  double tokens_per_s() const { return decode_seconds > 0 ? decode_tokens / decode_seconds : 0; }
  double acceptance() const { return drafted ? static_cast<double>(accepted) / drafted : 0; }
  double share(double x) const {
    const double round = draft_s + verify_s + network_s;
    return round > 0 ? x / round : 0;
  }
};

// Every prompt through the coordinator; BOS and the tail of a prompt too long
// for the context are kept (as spec-bench does).
absl::StatusOr<Row> RunServices(v1::Generation::Stub& stub, const std::vector<std::vector<TokenId>>& prompts,
                                int32_t n_ctx, int32_t max_tokens, double temperature, int32_t k) {
  Row row{"services", k != 0 ? "model" : "none", temperature, k};
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<TokenId> p = prompts[i];
    const size_t room = static_cast<size_t>(std::max(2, n_ctx - max_tokens));
    if (p.size() > room) p.erase(p.begin() + 1, p.end() - static_cast<std::ptrdiff_t>(room - 1));
    v1::GenerateRequest req;
    req.mutable_token_ids()->mutable_ids()->Add(p.begin(), p.end());
    req.set_max_tokens(max_tokens);
    req.set_temperature(static_cast<float>(temperature));
    req.set_seed(i);
    req.set_drafter(k != 0 ? v1::DRAFTER_MODEL : v1::DRAFTER_NONE);
    if (k < 0) {
      req.set_adaptive_k(true);
    } else {
      req.set_k(k);
    }
    int first_round_tokens = -1;
    ASSIGN_OR_RETURN(Streamed s, GenerateStreaming(stub, req, 600, [&](const v1::Delta& d) {
                       if (first_round_tokens < 0) first_round_tokens = d.token_ids_size();
                     }));
    const v1::GenerationStats& st = s.final.stats();
    if (k != 0 && st.drafter() != "model") {
      return absl::FailedPreconditionError("the coordinator did not use the draft model (drafter " + st.drafter() +
                                           "): is its draft service up?");
    }
    row.decode_tokens += st.tokens() - std::max(0, first_round_tokens);
    row.decode_seconds += st.total_seconds() - st.time_to_first_token_seconds();
    row.tokens += st.tokens();
    row.rounds += st.rounds();
    row.drafted += st.drafted();
    row.accepted += st.accepted();
    row.draft_s += st.draft_seconds();
    row.verify_s += st.verify_seconds();
    row.network_s += st.network_seconds();
  }
  return row;
}

Row FromBenchRun(const BenchRun& r, double temperature, int32_t k) {
  Row row{"in-process", k != 0 ? "model" : "none", temperature, k};
  row.decode_tokens = static_cast<double>(r.decode_tokens);
  row.decode_seconds = r.decode_seconds;
  row.tokens = r.generated;
  row.rounds = r.rounds;
  row.drafted = r.drafted;
  row.accepted = r.accepted;
  row.draft_s = r.draft_s;
  row.verify_s = r.verify_s;
  return row;
}

// With --json (or another such flag), the rows to that file.
absl::Status WriteJson(const CliArgs& args, const nlohmann::json& rows, const std::string& flag = "json") {
  if (!args.Given(flag)) return absl::OkStatus();
  std::ofstream f(args.Str(flag));
  f << rows.dump(2) << "\n";
  if (!f) return absl::InternalError("cannot write " + args.Str(flag));
  return absl::OkStatus();
}

// --concurrency: the load table (tools/load_bench.h), one row per drafter of
// --drafters (plain decoding, the model drafter, the coordinator's n-gram
// drafter) at each concurrency and temperature, through the services.
// With --openai-url: one row per concurrency and temperature against that
// server (whatever it does by default: drafter "server").
absl::Status RunLoadMode(const CliArgs& args, const SendFn& send, bool openai,
                         const std::vector<std::vector<TokenId>>& prompts, int32_t max_tokens, int64_t k) {
  LoadConfig base;
  if (openai) {
    base.where = "openai";
    base.drafter_label = "server";
  }
  base.max_tokens = max_tokens;
  ASSIGN_OR_RETURN(base.request_rate, args.Double("request-rate", 0, 1e6));
  ASSIGN_OR_RETURN(base.duration_s, args.Double("duration", 1, 24 * 3600));
  ASSIGN_OR_RETURN(int64_t repeats, args.Int("repeats", 1, 100));
  ASSIGN_OR_RETURN(base.slo_ttft_ms, args.Double("slo-ttft-ms", 0, 1e9));
  ASSIGN_OR_RETURN(base.slo_itl_ms, args.Double("slo-itl-ms", 0, 1e9));
  const std::string metrics_url = openai ? "" : args.Str("coordinator-metrics");
  std::vector<int> levels;
  for (absl::string_view c : absl::StrSplit(args.Str("concurrency"), ',', absl::SkipEmpty())) {
    int n = 0;
    if (!absl::SimpleAtoi(c, &n) || n < 1 || n > 4096) {
      return absl::InvalidArgumentError("--concurrency: a list of client counts such as 1,4,16");
    }
    levels.push_back(n);
  }
  if (levels.empty()) return absl::InvalidArgumentError("--concurrency: a list of client counts such as 1,4,16");
  std::vector<v1::Drafter> drafters;
  for (absl::string_view d : absl::StrSplit(args.Str("drafters"), ',', absl::SkipEmpty())) {
    if (d == "none") {
      drafters.push_back(v1::DRAFTER_NONE);
    } else if (d == "model") {
      drafters.push_back(v1::DRAFTER_MODEL);
    } else if (d == "ngram") {
      drafters.push_back(v1::DRAFTER_NGRAM);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("--drafters: none, model or ngram, not '", d, "'"));
    }
  }
  if (drafters.empty()) return absl::InvalidArgumentError("--drafters: a list such as none,model,ngram");
  std::printf("%s, %.0f s per row, %d tokens per request, %zu prompts\n",
              base.request_rate > 0 ? absl::StrCat("open loop at ", base.request_rate, " requests/s").c_str()
                                    : "closed loop",
              base.duration_s, max_tokens, prompts.size());
  PrintLoadHeader();
  nlohmann::json out = nlohmann::json::array(), samples = nlohmann::json::array();
  for (const std::string& t : std::vector<std::string>(absl::StrSplit(args.Str("temperatures"), ',', absl::SkipEmpty()))) {
    double temperature = 0;
    if (!absl::SimpleAtod(t, &temperature) || temperature < 0) return absl::InvalidArgumentError("bad temperature " + t);
    for (int n : levels) {
      // --repeats R: R slices of duration / R per drafter, in turn (plain,
      // speculative, plain, ...), merged into one row each.
      const std::vector<v1::Drafter> modes = openai ? std::vector<v1::Drafter>{v1::DRAFTER_NONE} : drafters;
      std::vector<std::vector<LoadResult>> slices(modes.size());
      for (int64_t rep = 0; rep < repeats; ++rep) {
        for (size_t m = 0; m < modes.size(); ++m) {
          LoadConfig c = base;
          c.concurrency = n;
          c.temperature = static_cast<float>(temperature);
          c.drafter = modes[m];
          c.k = modes[m] != v1::DRAFTER_NONE ? static_cast<int32_t>(k) : 0;
          c.duration_s = base.duration_s / static_cast<double>(repeats);
          KChoiceCounts before;
          if (!metrics_url.empty()) {
            ASSIGN_OR_RETURN(before, ScrapeKChoices(metrics_url));
          }
          ASSIGN_OR_RETURN(LoadResult r, RunLoad(send, prompts, c));
          if (!metrics_url.empty()) {
            ASSIGN_OR_RETURN(KChoiceCounts after, ScrapeKChoices(metrics_url));
            r.k_choices = after.Since(before);
          }
          slices[m].push_back(std::move(r));
        }
      }
      for (const std::vector<LoadResult>& parts : slices) {
        ASSIGN_OR_RETURN(LoadResult r, MergeLoad(parts));
        PrintLoadRow(r);
        std::fflush(stdout);
        out.push_back(LoadRowJson(r));
        for (nlohmann::json& one : LoadSamplesJson(r)) samples.push_back(std::move(one));
      }
    }
  }
  RETURN_IF_ERROR(WriteJson(args, samples, "samples-json"));
  return WriteJson(args, out);
}

// --prefix-tokens: cold and warm TTFT of a repeated prefix, with no drafter
// and with the model drafter at --k (tools/prefix_bench.h); with
// --openai-url, whatever that server does.
absl::Status RunPrefixMode(const CliArgs& args, const SendFn& send, bool openai,
                           std::vector<std::vector<TokenId>> prompts, int32_t max_tokens, int64_t k) {
  PrefixBenchConfig c;
  ASSIGN_OR_RETURN(int64_t n, args.Int("prefix-tokens", 1, 1 << 20));
  ASSIGN_OR_RETURN(int64_t s, args.Int("prefix-question-tokens", 1, 4096));
  ASSIGN_OR_RETURN(int64_t pairs, args.Int("prefix-pairs", 1, 1000));
  c.prefix_tokens = static_cast<int32_t>(n);
  c.suffix_tokens = static_cast<int32_t>(s);
  c.pairs = static_cast<int>(pairs);
  c.request.max_tokens = max_tokens;
  if (openai) {
    c.request.where = "openai";
    c.request.drafter_label = "server";
  }
  nlohmann::json out = nlohmann::json::array();
  for (bool speculate : openai ? std::vector<bool>{false} : std::vector<bool>{false, true}) {
    c.request.drafter = speculate ? v1::DRAFTER_MODEL : v1::DRAFTER_NONE;
    c.request.k = speculate ? static_cast<int32_t>(k) : 0;
    ASSIGN_OR_RETURN(nlohmann::json rows, RunPrefixBench(send, prompts, c));
    // The next drafter needs prefixes no earlier run cached: the next prompts.
    prompts.erase(prompts.begin(), prompts.begin() + std::min(prompts.size(), static_cast<size_t>(c.pairs)));
    for (auto& r : rows) out.push_back(r);
  }
  return WriteJson(args, out);
}

absl::Status Run(const CliArgs& args) {
  ASSIGN_OR_RETURN(int64_t max_tokens, args.Int("max-tokens", 1, 900));
  ASSIGN_OR_RETURN(int64_t limit, args.Int("limit", 1, 100000));
  // Prefix mode takes texts from as many prompts as it needs.
  if (args.Given("prefix-tokens") && !args.Given("limit")) limit = 100000;
  int64_t k = -1;
  if (args.Str("k") != "adaptive") {
    ASSIGN_OR_RETURN(k, args.Int("k", 1, 16));
  }
  ASSIGN_OR_RETURN(const int threads, ThreadsFromFlag(args.Str("threads"), UsableCpus()));
  ASSIGN_OR_RETURN(int64_t lookup, args.Int("lookup", 0, 16));
  if (args.Given("openai-url")) {
    if (!args.Given("concurrency") && !args.Given("prefix-tokens")) {
      return absl::InvalidArgumentError("--openai-url needs --concurrency or --prefix-tokens");
    }
    ASSIGN_OR_RETURN(auto target_model, Model::Load(args.Str("target-model")));
    ASSIGN_OR_RETURN(auto tok, Tokenizer::FromGguf(*target_model->file));
    ASSIGN_OR_RETURN(auto prompts, LoadPrompts(args.Str("prompts"), *tok, static_cast<int>(limit)));
    std::string key;
    if (args.Given("api-key-file")) {
      std::ifstream f(args.Str("api-key-file"));
      if (!(f >> key)) return absl::InvalidArgumentError("cannot read an API key from " + args.Str("api-key-file"));
    }
    ASSIGN_OR_RETURN(SendFn send, OpenAiSender({args.Str("openai-url"), args.Str("openai-model"), key}, *tok));
    if (args.Given("prefix-tokens")) {
      return RunPrefixMode(args, send, /*openai=*/true, std::move(prompts), static_cast<int32_t>(max_tokens), k);
    }
    return RunLoadMode(args, send, /*openai=*/true, prompts, static_cast<int32_t>(max_tokens), k);
  }
  auto stub = ConnectCoordinator(args.Str("coordinator"));
  v1::GetModelInfoResponse info;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    ctx.set_wait_for_ready(true);
    grpc::Status s = stub->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info);
    if (!s.ok()) return rpc::FromGrpc(s);
  }
  if (info.draft_model().empty()) return absl::FailedPreconditionError("the coordinator has no usable draft service");

  // The local copies of the models: the tokenizer for the prompts and the in-process runs.
  ASSIGN_OR_RETURN(auto target_model, Model::Load(args.Str("target-model")));
  ASSIGN_OR_RETURN(auto draft_model, Model::Load(args.Str("draft-model")));
  ASSIGN_OR_RETURN(auto tok, Tokenizer::FromGguf(*target_model->file));
  ASSIGN_OR_RETURN(auto prompts, LoadPrompts(args.Str("prompts"), *tok, static_cast<int>(limit)));
  if (args.Given("prefix-tokens")) {
    return RunPrefixMode(args, GrpcSender(*stub), /*openai=*/false, std::move(prompts),
                         static_cast<int32_t>(max_tokens), k);
  }
  if (args.Given("concurrency")) {
    return RunLoadMode(args, GrpcSender(*stub), /*openai=*/false, prompts, static_cast<int32_t>(max_tokens), k);
  }
  BackendOptions bo;
  bo.shared_pool = std::make_shared<ThreadPool>(static_cast<int>(threads));
  ASSIGN_OR_RETURN(bo.cpu_activations, ParseMatMulActivations(args.Str("cpu-activations")));
  ASSIGN_OR_RETURN(auto target, MakeCpuBackend(*target_model, bo));
  ASSIGN_OR_RETURN(auto draft, MakeCpuBackend(*draft_model, bo));

  std::printf("services: %s + %s; in-process: %s + %s, %lld thread(s); %zu prompts x %lld tokens\n",
              info.target_model().c_str(), info.draft_model().c_str(), target_model->config.name.c_str(),
              draft_model->config.name.c_str(), static_cast<long long>(threads), prompts.size(),
              static_cast<long long>(max_tokens));
  std::printf("%-10s %4s %-7s %2s %9s %9s %11s %7s %8s %6s %6s %8s\n", "where", "T", "drafter", "K", "tokens/s",
              "vs plain", "vs in-proc", "accept", "tok/pass", "draft", "verify", "network");
  nlohmann::json out = nlohmann::json::array();
  for (const std::string& t : std::vector<std::string>(absl::StrSplit(args.Str("temperatures"), ',', absl::SkipEmpty()))) {
    double temperature = 0;
    if (!absl::SimpleAtod(t, &temperature) || temperature < 0) return absl::InvalidArgumentError("bad temperature " + t);
    std::vector<Row> rows;
    for (int32_t kk : {0, static_cast<int32_t>(k)}) {
      ASSIGN_OR_RETURN(Row svc, RunServices(*stub, prompts, info.context_length(), static_cast<int32_t>(max_tokens),
                                            temperature, kk));
      BenchRun local;
      RunSetup setup;
      setup.kind = kk != 0 ? v1::DRAFTER_MODEL : v1::DRAFTER_NONE;
      setup.k = kk < 0 ? KPolicy::Adaptive() : KPolicy::Fixed(kk);
      setup.temperature = static_cast<float>(temperature);
      setup.max_tokens = static_cast<int32_t>(max_tokens);
      setup.lookup_min_ngram = static_cast<int32_t>(lookup);
      RETURN_IF_ERROR(RunConfig(*target, kk != 0 ? draft.get() : nullptr, setup, prompts, &local));
      rows.push_back(svc);
      rows.push_back(FromBenchRun(local, temperature, kk));
    }
    // rows: services plain, in-process plain, services model, in-process model.
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      const double vs_plain = r.tokens_per_s() / std::max(1e-9, rows[i % 2].tokens_per_s());
      const double vs_local = r.tokens_per_s() / std::max(1e-9, rows[i | 1].tokens_per_s());
      const std::string kname = r.k < 0 ? "ad" : std::to_string(r.k);
      std::printf("%-10s %4.1f %-7s %2s %9.0f %8.2fx %10.2fx %7.3f %8.2f %5.0f%% %5.0f%% %7.0f%%\n", r.where.c_str(),
                  r.temperature, r.drafter.c_str(), kname.c_str(), r.tokens_per_s(), vs_plain, vs_local, r.acceptance(),
                  r.rounds ? static_cast<double>(r.tokens) / r.rounds : 0, 100 * r.share(r.draft_s),
                  100 * r.share(r.verify_s), 100 * r.share(r.network_s));
      out.push_back({{"where", r.where}, {"temperature", r.temperature}, {"drafter", r.drafter}, {"k", r.k < 0 ? nlohmann::json("adaptive") : nlohmann::json(r.k)},
                     {"tokens_per_s", r.tokens_per_s()}, {"speedup_vs_plain", vs_plain},
                     {"ratio_vs_in_process", vs_local}, {"acceptance_rate", r.acceptance()},
                     {"tokens_per_pass", r.rounds ? static_cast<double>(r.tokens) / r.rounds : 0},
                     {"draft_seconds", r.draft_s}, {"verify_seconds", r.verify_s}, {"network_seconds", r.network_s},
                     {"network_share", r.share(r.network_s)}});
    }
  }
  return WriteJson(args, out);
}

}  // namespace

int ServeBench(int argc, char** argv) {
  CliArgs args("usage: specserve serve-bench --coordinator HOST:PORT [--prompts FILE] [flags]");
  args.Flag("coordinator", "127.0.0.1:50051", "a running coordinator with a draft service");
  args.Flag("target-model", "models/code-target-7m.gguf", "the target's GGUF, for the prompts' tokens and the in-process runs");
  args.Flag("draft-model", "models/code-draft-1m.gguf", "the draft's GGUF, for the in-process runs");
  args.Flag("prompts", "bench/prompts.jsonl", "JSON-lines file with a \"prompt\" field per line");
  args.Flag("limit", "8", "use the first N prompts");
  args.Flag("max-tokens", "256", "new tokens per prompt (end of sequence stops a request early)");
  args.Flag("temperatures", "0,1", "comma-separated temperatures");
  args.Flag("k", "adaptive", "tokens drafted per round: adaptive (the coordinator's default) or 1..16");
  args.Flag("threads", "auto", "CPU threads of the in-process runs (auto: the cores this process may use)");
  args.Flag("cpu-activations", "int8", "the in-process runs' CPU matrix products: fp32 or int8 (as the services')");
  args.Flag("lookup", "2", "the in-process runs' prompt lookup (as the coordinator's --draft-lookup, default 2)");
  args.Flag("json", "", "also write one JSON object per row to this file");
  args.Flag("samples-json", "", "load mode: also write every request (TTFT, E2E, rounds, each delta's gap) to this file");
  args.Flag("concurrency", "",
            "load mode: comma-separated numbers of concurrent clients (e.g. 1,4,16); each row reports throughput, "
            "goodput and TTFT / inter-token / end-to-end latency percentiles (tools/load_bench.h)");
  args.Flag("prefix-tokens", "",
            "prefix mode: the time to first token of a request whose first N tokens an earlier request sent "
            "(cold vs warm; tools/prefix_bench.h); reads every prompt unless --limit is given");
  args.Flag("prefix-question-tokens", "16", "prefix mode: the tokens after the shared prefix");
  args.Flag("prefix-pairs", "4", "prefix mode: cold/warm pairs per drafter");
  args.Flag("drafters", "none,model",
            "load mode: comma-separated drafters, a row each: none (plain decoding), model (the draft service), "
            "ngram (the coordinator's prompt lookup, no draft service)");
  args.Flag("request-rate", "0", "load mode: Poisson arrivals per second (0: closed loop)");
  args.Flag("duration", "30", "load mode: seconds per row (no request starts after this)");
  args.Flag("repeats", "1",
            "load mode: split each row's --duration into this many slices, run in turn with the other "
            "drafters' (plain, speculative, plain, ...) and merged, so that a slow spell of a shared "
            "machine falls on all of them");
  args.Flag("slo-ttft-ms", "2000", "load mode: goodput counts requests with TTFT within this ...");
  args.Flag("slo-itl-ms", "200", "... and p99 inter-token latency within this");
  args.Flag("openai-url", "",
            "load mode against any OpenAI-compatible server instead (http://host:port, POST /v1/completions "
            "streamed; the prompts as token ids of --target-model's tokenizer)");
  args.Flag("coordinator-metrics", "",
            "with --concurrency: http://host:port of the coordinator's metrics; each row then says why its rounds' K "
            "was chosen (specserve_k_choices_total) and the gain drafting promised");
  args.Flag("openai-model", "", "with --openai-url: the `model` field sent (default: the first of GET /v1/models)");
  args.Flag("api-key-file", "", "with --openai-url: a file holding the Bearer API key");
  return RunCommand(args, argc, argv, "serve-bench", Run);
}

}  // namespace specserve::cli
