#include "tools/load_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "tools/coordinator_client.h"

namespace specserve::cli {
namespace {

using Clock = LoadClock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

v1::GenerateRequest MakeRequest(const std::vector<TokenId>& prompt, const LoadConfig& c, int64_t seed) {
  v1::GenerateRequest req;
  req.mutable_token_ids()->mutable_ids()->Add(prompt.begin(), prompt.end());
  req.set_max_tokens(c.max_tokens);
  req.set_temperature(c.temperature);
  req.set_seed(static_cast<uint64_t>(seed));
  req.set_drafter(c.drafter);
  if (c.drafter != v1::DRAFTER_NONE && c.k < 0) {
    req.set_adaptive_k(true);
  } else {
    req.set_k(c.drafter == v1::DRAFTER_NONE ? 0 : c.k);
  }
  return req;
}

}  // namespace

void RequestSample::AddDelta(int64_t n, LoadClock::time_point arrival) {
  if (n <= 0) return;
  const Clock::time_point now = Clock::now();
  if (!started_) {
    ttft_ms = Ms(now - arrival);
    started_ = true;
  } else {
    gaps.push_back({Ms(now - last_), n});
  }
  last_ = now;
}

std::vector<double> RequestSample::ItlMs() const {
  std::vector<double> itl;
  for (const Gap& g : gaps) itl.insert(itl.end(), g.tokens, g.ms / static_cast<double>(g.tokens));
  return itl;
}

SendFn GrpcSender(v1::Generation::Stub& stub) {
  return [&stub](const std::vector<TokenId>& prompt, const LoadConfig& config, int64_t seed,
                 Clock::time_point arrival) {
    RequestSample s;
    absl::StatusOr<Streamed> r = GenerateStreaming(stub, MakeRequest(prompt, config, seed), 600,
                                                   [&](const v1::Delta& d) { s.AddDelta(d.token_ids_size(), arrival); });
    s.e2e_ms = Ms(Clock::now() - arrival);
    if (!r.ok()) {
      s.error = r.status().ToString();
      return s;
    }
    const v1::GenerationStats& st = r->final.stats();
    s.ok = true;
    s.tokens = st.tokens();
    s.rounds = st.rounds();
    s.drafted = st.drafted();
    s.accepted = st.accepted();
    return s;
  };
}

Percentiles ComputePercentiles(std::vector<double>& v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) {
    const size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, i == 0 ? 0 : i - 1)];
  };
  p.p50 = rank(0.50);
  p.p90 = rank(0.90);
  p.p99 = rank(0.99);
  return p;
}

absl::StatusOr<LoadResult> RunLoad(const SendFn& send, const std::vector<std::vector<TokenId>>& prompts,
                                   const LoadConfig& config) {
  if (prompts.empty()) return absl::InvalidArgumentError("serve-bench: no prompts");
  if (config.concurrency < 1) return absl::InvalidArgumentError("serve-bench: --concurrency must be >= 1");
  // Open loop: the arrival times, fixed in advance (seeded), so that runs
  // with and without speculation see the same schedule.
  std::vector<double> arrivals_s;
  if (config.request_rate > 0) {
    std::mt19937_64 rng(1);
    std::exponential_distribution<double> gap(config.request_rate);
    for (double t = 0; t < config.duration_s; t += gap(rng)) arrivals_s.push_back(t);
  }
  const Clock::time_point start = Clock::now();
  const auto duration = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(config.duration_s));
  std::atomic<int64_t> next{0};
  struct Collected {
    absl::Mutex mu;
    std::vector<RequestSample> samples ABSL_GUARDED_BY(mu);
    Clock::time_point last_end ABSL_GUARDED_BY(mu);
  } collected;
  {
    absl::MutexLock lock(&collected.mu);
    collected.last_end = start;
  }
  std::atomic<int64_t> done_tokens{0}, done_requests{0};

  auto worker = [&] {
    for (;;) {
      const int64_t i = next.fetch_add(1);
      Clock::time_point arrival;
      if (config.request_rate > 0) {
        if (i >= static_cast<int64_t>(arrivals_s.size())) return;
        arrival = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrivals_s[i]));
        std::this_thread::sleep_until(arrival);
      } else {
        arrival = Clock::now();
        if (arrival - start >= duration) return;
      }
      RequestSample s = send(prompts[i % prompts.size()], config, i, arrival);
      s.start_ms = Ms(arrival - start);
      s.prompt = i % static_cast<int64_t>(prompts.size());
      done_tokens += s.tokens;
      ++done_requests;
      absl::MutexLock lock(&collected.mu);
      collected.last_end = std::max(collected.last_end, Clock::now());
      collected.samples.push_back(std::move(s));
    }
  };

  struct Progress {
    absl::Mutex mu;
    bool finished ABSL_GUARDED_BY(mu) = false;  // ends the wait between progress lines at once
  } progress_state;
  std::thread progress([&] {
    if (!config.progress) return;
    absl::MutexLock lock(&progress_state.mu);
    while (!progress_state.mu.AwaitWithTimeout(absl::Condition(&progress_state.finished), absl::Seconds(5))) {
      const double t = std::chrono::duration<double>(Clock::now() - start).count();
      std::fprintf(stderr, "  concurrency %d: %5.0f s, %lld requests done, %lld tokens, %.1f tokens/s\n",
                   config.concurrency, t, static_cast<long long>(done_requests.load()),
                   static_cast<long long>(done_tokens.load()), done_tokens.load() / std::max(1e-9, t));
    }
  });
  std::vector<std::thread> clients;
  for (int c = 0; c < config.concurrency; ++c) clients.emplace_back(worker);
  for (auto& t : clients) t.join();
  {
    absl::MutexLock lock(&progress_state.mu);
    progress_state.finished = true;
  }
  progress.join();

  std::vector<RequestSample> samples;
  Clock::time_point last_end;
  {
    absl::MutexLock lock(&collected.mu);
    samples = std::move(collected.samples);
    last_end = collected.last_end;
  }
  return SummarizeLoad(config, std::move(samples), std::chrono::duration<double>(last_end - start).count());
}

absl::StatusOr<LoadResult> SummarizeLoad(const LoadConfig& config, std::vector<RequestSample> samples, double wall_s) {
  LoadResult r;
  r.config = config;
  r.wall_s = wall_s;
  std::vector<double> ttft, itl, e2e, tpot;
  for (RequestSample& s : samples) {
    ++r.requests;
    if (!s.ok) {
      ++r.errors;
      if (r.first_error.empty()) r.first_error = s.error;
      continue;
    }
    r.tokens += s.tokens;
    r.rounds += s.rounds;
    r.drafted += s.drafted;
    r.accepted += s.accepted;
    ttft.push_back(s.ttft_ms);
    e2e.push_back(s.e2e_ms);
    if (s.tokens > 1) tpot.push_back((s.e2e_ms - s.ttft_ms) / static_cast<double>(s.tokens - 1));
    std::vector<double> own = s.ItlMs();
    itl.insert(itl.end(), own.begin(), own.end());
    const Percentiles mine = ComputePercentiles(own);
    if (s.ttft_ms <= config.slo_ttft_ms && mine.p99 <= config.slo_itl_ms) r.good_tokens += s.tokens;
  }
  if (r.requests == 0) return absl::DeadlineExceededError("serve-bench: no request started within --duration");
  if (r.errors == r.requests) {
    return absl::UnavailableError("serve-bench: every request failed; the first: " + r.first_error);
  }
  r.ttft_ms = ComputePercentiles(ttft);
  r.itl_ms = ComputePercentiles(itl);
  r.e2e_ms = ComputePercentiles(e2e);
  r.tpot_ms = ComputePercentiles(tpot);
  r.samples = std::move(samples);
  return r;
}

absl::StatusOr<LoadResult> MergeLoad(const std::vector<LoadResult>& parts) {
  if (parts.empty()) return absl::InvalidArgumentError("serve-bench: nothing to merge");
  LoadConfig config = parts[0].config;
  config.duration_s = 0;
  std::vector<RequestSample> samples;
  double wall_s = 0;
  KChoiceCounts k_choices;
  for (const LoadResult& p : parts) {
    k_choices += p.k_choices;
    config.duration_s += p.config.duration_s;
    wall_s += p.wall_s;
    samples.insert(samples.end(), p.samples.begin(), p.samples.end());
  }
  ASSIGN_OR_RETURN(LoadResult r, SummarizeLoad(config, std::move(samples), wall_s));
  r.repeats = static_cast<int>(parts.size());
  r.k_choices = std::move(k_choices);
  return r;
}

std::string DrafterLabel(const LoadConfig& c) {
  if (!c.drafter_label.empty()) return c.drafter_label;
  if (c.drafter == v1::DRAFTER_NONE) return "none";
  const char* name = c.drafter == v1::DRAFTER_NGRAM ? "ngram" : "model";
  return c.k < 0 ? absl::StrCat(name, "/ad") : absl::StrCat(name, "/", c.k);
}

void PrintLoadHeader() {
  std::printf("%4s %4s %-9s %5s %4s %9s %9s %15s %15s %15s %17s %7s %8s\n", "conc", "T", "drafter", "req", "err",
              "tok/s", "goodput", "TTFT p50/p99 ms", "ITL p50/p99 ms", "TPOT p50/p99 ms", "E2E p50/p99 ms", "accept",
              "tok/pass");
}

void PrintLoadRow(const LoadResult& r) {
  std::printf("%4d %4.1f %-9s %5lld %4lld %9.1f %9.1f %7.0f/%-7.0f %7.1f/%-7.1f %7.1f/%-7.1f %8.0f/%-8.0f %7.3f %8.2f\n",
              r.config.concurrency, r.config.temperature, DrafterLabel(r.config).c_str(),
              static_cast<long long>(r.requests), static_cast<long long>(r.errors), r.throughput(), r.goodput(),
              r.ttft_ms.p50, r.ttft_ms.p99, r.itl_ms.p50, r.itl_ms.p99, r.tpot_ms.p50, r.tpot_ms.p99, r.e2e_ms.p50,
              r.e2e_ms.p99, r.acceptance(), r.tokens_per_pass());
  if (!r.k_choices.empty()) std::printf("%19s K: %s\n", "", r.k_choices.Line().c_str());
}

nlohmann::json LoadRowJson(const LoadResult& r) {
  nlohmann::json j = {{"concurrency", r.config.concurrency},
                      {"request_rate", r.config.request_rate},
                      {"drafter", !r.config.drafter_label.empty()            ? r.config.drafter_label
                                  : r.config.drafter == v1::DRAFTER_NONE  ? "none"
                                  : r.config.drafter == v1::DRAFTER_NGRAM ? "ngram"
                                                                          : "model"},
                      {"k", !r.config.drafter_label.empty() ? nlohmann::json(nullptr)  // the server's choice
                            : r.config.k < 0                ? nlohmann::json("adaptive")
                                                            : nlohmann::json(r.config.k)},
                      {"where", r.config.where},
                      {"temperature", r.config.temperature},
                      {"requests", r.requests},
                      {"errors", r.errors},
                      {"tokens", r.tokens},
                      {"wall_seconds", r.wall_s},
                      {"repeats", r.repeats},
                      {"throughput_tokens_per_s", r.throughput()},
                      {"goodput_tokens_per_s", r.goodput()},
                      {"acceptance_rate", r.acceptance()},
                      {"tokens_per_pass", r.tokens_per_pass()}};
  for (const auto& [name, p] : {std::pair<const char*, const Percentiles*>{"ttft", &r.ttft_ms},
                                {"itl", &r.itl_ms}, {"e2e", &r.e2e_ms},
                                {"tpot", &r.tpot_ms}}) {
    j[std::string(name) + "_p50_ms"] = p->p50;
    j[std::string(name) + "_p90_ms"] = p->p90;
    j[std::string(name) + "_p99_ms"] = p->p99;
  }
  if (!r.first_error.empty()) j["first_error"] = r.first_error;
  if (!r.k_choices.empty()) j["k_choices"] = r.k_choices.Json();
  return j;
}

nlohmann::json LoadSamplesJson(const LoadResult& r) {
  nlohmann::json out = nlohmann::json::array();
  for (const RequestSample& s : r.samples) {
    nlohmann::json j = {{"concurrency", r.config.concurrency},
                        {"drafter", DrafterLabel(r.config)},
                        {"temperature", r.config.temperature}};
    if (!s.ok) {
      j["error"] = s.error;
    } else {
      nlohmann::json gaps = nlohmann::json::array();
      for (const RequestSample::Gap& g : s.gaps) gaps.push_back({g.ms, g.tokens});
      j.update({{"ttft_ms", s.ttft_ms}, {"e2e_ms", s.e2e_ms}, {"tokens", s.tokens}, {"rounds", s.rounds},
                {"drafted", s.drafted}, {"accepted", s.accepted}, {"start_ms", s.start_ms},
                {"prompt", s.prompt}, {"gaps", std::move(gaps)}});
    }
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace specserve::cli
