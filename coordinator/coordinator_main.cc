// specserve-coordinator: the public Generation API. Runs each request's
// speculative round loop against specserve-target (required) and
// specserve-draft (optional; the n-gram drafter stands in when it is absent
// or fails), with health, reflection and /metrics; with --http-listen also
// the OpenAI-compatible HTTP API (coordinator/http_server.h).
#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "chat/chat_template.h"
#include "common/build_info.h"
#include "common/cli_args.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/coordinator_metrics.h"
#include "coordinator/generation_service.h"
#include "coordinator/http_server.h"
#include "coordinator/stats_log.h"
#include "coordinator/upstreams.h"
#include "rpc/cpu_affinity.h"
#include "rpc/metrics_server.h"
#include "rpc/grpc_server.h"
#include "rpc/service_flags.h"
#include "rpc/tls.h"

namespace specserve {
namespace {

struct Flags : rpc::ServerFlags {
  Upstreams::Options upstreams;
  CoordinatorOptions coordinator;
  RequestQueue::Options queue;  // run slots (--max-sessions) and the waiting line
  HttpOptions http;  // http.listen empty: no HTTP API
  double stats_interval_s = 10;  // the periodic stats line (0: off)
  std::vector<int> cpus;         // --cpus: cores to pin the process to (empty: no pinning)
};

absl::StatusOr<std::string> ReadTextFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", path, ": cannot read"));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::Status ReadHttpFlags(const CliArgs& a, Flags* f) {
  f->http.listen = a.Str("http-listen");
  if (const std::string path = a.Str("api-key-file"); !path.empty()) {
    ASSIGN_OR_RETURN(std::string key, ReadTextFile("api-key-file", path));
    f->http.api_key = std::string(absl::StripAsciiWhitespace(key));
    if (f->http.api_key.empty()) return absl::InvalidArgumentError("--api-key-file " + path + " is empty");
  }
  if (const std::string path = a.Str("chat-template"); !path.empty()) {
    ASSIGN_OR_RETURN(f->http.chat_template, ReadTextFile("chat-template", path));
    if (absl::Status s = CheckChatTemplate(ChatTemplate{f->http.chat_template, "", ""}); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--chat-template ", path, ": ", s.message()));
    }
  }
  // Each connection has a thread, waiting ones included; leave room for idle
  // keep-alive ones.
  f->http.threads = f->max_sessions + f->queue.max_waiting + 32;
  // Prompts of --max-prompt-bytes, JSON-escaped.
  f->http.max_body_bytes = static_cast<size_t>(f->coordinator.max_prompt_bytes) * 6 + (64 << 10);
  return absl::OkStatus();
}

absl::StatusOr<Flags> ReadFlags(const CliArgs& a) {
  Flags f;
  RETURN_IF_ERROR(rpc::ReadServerFlags(a, &f));
  f.upstreams.target = a.Str("target");
  f.upstreams.draft = a.Str("draft");
  if (f.upstreams.target.empty()) return absl::InvalidArgumentError("--target is required");
  ASSIGN_OR_RETURN(int64_t max_tokens, a.Int("default-max-tokens", 1, 1 << 20));
  ASSIGN_OR_RETURN(f.upstreams.connect_timeout_seconds, a.Double("connect-timeout", 0, 3600));
  ASSIGN_OR_RETURN(int64_t draft_timeout_ms, a.Int("draft-timeout-ms", 0, 3600 * 1000));
  f.coordinator.draft_timeout = std::chrono::milliseconds(draft_timeout_ms);
  ASSIGN_OR_RETURN(f.coordinator.draft_open_ms_per_token, a.Double("draft-open-ms-per-token", 0, 60000));
  ASSIGN_OR_RETURN(double verify_timeout_s, a.Double("verify-timeout-s", 0, 24 * 3600));
  f.coordinator.verify_timeout = std::chrono::milliseconds(static_cast<int64_t>(verify_timeout_s * 1000));
  ASSIGN_OR_RETURN(f.coordinator.max_prompt_bytes, a.Int("max-prompt-bytes", 1, int64_t{1} << 32));
  ASSIGN_OR_RETURN(int64_t draft_lookup, a.Int("draft-lookup", 0, 16));
  f.coordinator.draft_lookup = static_cast<int>(draft_lookup);
  const std::string overlap = a.Str("overlap");
  if (overlap != "on" && overlap != "off") return absl::InvalidArgumentError("--overlap must be on or off");
  f.coordinator.overlap = overlap == "on";
  const std::string k = a.Str("default-k");
  if (k == "adaptive") {
    f.coordinator.default_k = -1;
  } else {
    ASSIGN_OR_RETURN(int64_t kv, a.Int("default-k", 0, kMaxRoundK));
    f.coordinator.default_k = static_cast<int>(kv);
  }
  f.coordinator.default_max_tokens = static_cast<int>(max_tokens);
  ASSIGN_OR_RETURN(int64_t spec_max, a.Int("speculation-max-sessions", 0, 1 << 20));
  f.coordinator.speculation_max_sessions = static_cast<int>(spec_max);
  ASSIGN_OR_RETURN(f.stats_interval_s, a.Double("stats-interval-s", 0, 24 * 3600));
  ASSIGN_OR_RETURN(f.cpus, rpc::ParseCpuList(a.Str("cpus")));
  f.upstreams.max_message_bytes = f.server.max_message_bytes;
  // Mutual TLS toward the services only: the public --listen port stays
  // plaintext (f.server.tls is left off).
  ASSIGN_OR_RETURN(f.upstreams.tls, rpc::ReadTlsFlags(a));
  f.upstreams.lb_policy = a.Str("lb-policy");
  if (f.upstreams.lb_policy != "round_robin" && f.upstreams.lb_policy != "pick_first") {
    return absl::InvalidArgumentError("--lb-policy must be round_robin or pick_first");
  }
  f.queue.max_running = f.max_sessions;
  ASSIGN_OR_RETURN(int64_t max_waiting, a.Int("max-waiting", 0, 1 << 16));
  f.queue.max_waiting = static_cast<int>(max_waiting);
  ASSIGN_OR_RETURN(double queue_s, a.Double("queue-timeout-s", 0, 3600));
  f.queue.timeout = std::chrono::milliseconds(static_cast<int64_t>(queue_s * 1000));
  RETURN_IF_ERROR(ReadHttpFlags(a, &f));
  return f;
}

int Fail(const absl::Status& s) {
  log::Error(s.ToString());
  return 1;
}

int Main(int argc, char** argv) {
  rpc::GrpcServer::BlockTerminationSignals();
  CliArgs args("usage: specserve-coordinator --target HOST:PORT [--draft HOST:PORT] [--listen HOST:PORT] [flags]\n"
               "Serves specserve.v1.Generation with speculative decoding over the target and draft services.");
  rpc::DeclareServerFlags(args, "0.0.0.0:50051", 9101, "requests");
  args.Flag("target", "", "the target service, HOST:PORT (required)");
  args.Flag("draft", "", "the draft service, HOST:PORT (optional; without it requests draft with n-grams)");
  args.Flag("default-k", "adaptive", "tokens drafted per round when a request does not say: 0..16 or \"adaptive\"");
  args.Flag("default-max-tokens", "128", "max_tokens when a request does not say");
  args.Flag("speculation-max-sessions", "0",
            "every request decodes plainly while the target reports this many sessions open or more, whatever "
            "its K (vLLM's disable-by-batch-size; 0: never)");
  args.Flag("connect-timeout", "60", "seconds to wait at start for the target to answer");
  args.Flag("overlap", "on", "on: the draft service drafts the next block while the target verifies; off: they take turns");
  args.Flag("verify-timeout-s", "60", "a verify call slower than this fails the request with UNAVAILABLE (0: wait)");
  args.Flag("max-prompt-bytes", std::to_string(1 << 20), "longest prompt text accepted, in bytes (checked before tokenizing)");
  args.Flag("draft-timeout-ms", "2000",
            "a draft call slower than this is a draft failure: the request goes on with n-gram drafting (0: wait)");
  args.Flag("draft-open-ms-per-token", "20",
            "the first draft call waits for the draft's prefill: it may take --draft-timeout-ms plus this per "
            "prompt token");
  args.Flag("draft-lookup", "2",
            "greedy requests: the draft service proposes a prompt-lookup continuation, with no draft pass, when "
            "the last N+ tokens occurred before in the context (0: off)");
  args.Flag("lb-policy", "round_robin",
            "how sessions spread over the addresses --target and --draft resolve to (dns:///NAME:PORT of a "
            "headless Service): round_robin or pick_first");
  args.Flag("max-waiting", "256",
            "requests beyond --max-sessions wait in arrival order, at most this many (more get RESOURCE_EXHAUSTED, "
            "HTTP 429; 0: refuse at once)");
  args.Flag("queue-timeout-s", "10",
            "a waiting request gets RESOURCE_EXHAUSTED (HTTP 429) after this long, or DEADLINE_EXCEEDED at its own "
            "deadline if that comes first");
  args.Flag("http-listen", "", "HOST:PORT for the OpenAI-compatible HTTP API (docs/http_api.md); empty: none");
  args.Flag("api-key-file", "", "a file holding the key HTTP clients must send (Authorization: Bearer KEY); empty: none");
  args.Flag("chat-template", "",
            "a Jinja chat template file for /v1/chat/completions; empty: the target model's, else ChatML");
  args.Flag("stats-interval-s", "10",
            "every this many seconds, log a stats line: tokens/s, requests running and waiting, acceptance rate and "
            "tokens per round since the last one (0: off)");
  args.Flag("cpus", "",
            "pin the coordinator to these cores, e.g. 1; on a machine where the services are pinned too, beside "
            "the draft service, off the target's cores (docs/services.md); empty: no pinning");
  rpc::DeclareTlsFlags(args, rpc::TlsRole::kClient);
  if (int rc = rpc::ParseServiceArgs(args, argc, argv, "specserve-coordinator"); rc >= 0) return rc;
  absl::StatusOr<Flags> flags = ReadFlags(args);
  if (!flags.ok()) return Fail(flags.status()), 2;
  // Before any thread starts, so that every thread inherits the cores.
  if (absl::Status pinned = rpc::PinProcessToCpus(flags->cpus); !pinned.ok()) return Fail(pinned), 2;

  absl::StatusOr<std::unique_ptr<rpc::MetricsServer>> metrics = rpc::MetricsServer::Start(flags->metrics_port, flags->metrics_host);
  if (!metrics.ok()) return Fail(metrics.status());
  CoordinatorMetrics coordinator_metrics((*metrics)->registry());
  GenerationService service(&coordinator_metrics, flags->coordinator, flags->queue);
  // Health says NOT_SERVING until the target has answered.
  auto server = rpc::GrpcServer::Start(flags->server, {&service});
  if (!server.ok()) return Fail(server.status());
  // The HTTP API answers 503 until then too.
  std::unique_ptr<HttpServer> http;
  if (!flags->http.listen.empty()) {
    absl::StatusOr<std::unique_ptr<HttpServer>> h = HttpServer::Start(flags->http, &service);
    if (!h.ok()) return Fail(h.status());
    http = std::move(*h);
  }
  // Health follows the target once the service has its upstreams (before
  // that, SERVING would let clients in to an UNAVAILABLE answer); SIGTERM
  // ends the wait for the target.
  std::atomic<bool> attached{false};
  flags->upstreams.on_target_health = [&server, &attached](bool serving) {
    (*server)->SetServing(serving && attached.load());
  };
  flags->upstreams.should_stop = [] { return rpc::GrpcServer::TakePendingSignal() != 0; };
  absl::StatusOr<std::unique_ptr<Upstreams>> upstreams = Upstreams::Connect(flags->upstreams);
  if (absl::IsCancelled(upstreams.status())) {
    log::Info("signal while waiting for the target: exiting");
    return 0;
  }
  if (!upstreams.ok()) return Fail(upstreams.status());
  service.Attach(upstreams->get());
  attached.store(true);
  (*server)->SetServing(true);
  log::Info(absl::StrFormat("target %s (%s), draft %s%s, listening on port %d, metrics port %d%s",
                            flags->upstreams.target, (*upstreams)->target_info().name(),
                            flags->upstreams.draft.empty() ? "none" : flags->upstreams.draft,
                            flags->upstreams.tls.enabled() ? " (mutual TLS)" : "", (*server)->port(), (*metrics)->port(),
                            http ? absl::StrCat(", HTTP port ", http->port(),
                                                flags->http.api_key.empty() ? "" : " (API key)")
                                 : ""),
            {{"version", GetBuildInfo().version}, {"git_sha", GetBuildInfo().git_sha}});
  StatsLog stats(&coordinator_metrics, std::chrono::duration<double>(flags->stats_interval_s));

  const int sig = rpc::GrpcServer::WaitForSignal();
  log::Info(absl::StrFormat("signal %d, draining", sig));
  (*server)->Drain([&] { service.StartDraining(); }, [&] { return service.active(); });
  // HTTP requests count in service.active(): those still running after the
  // drain are cancelled here.
  if (http) http->Stop();
  service.WaitIdle();
  return 0;
}

}  // namespace
}  // namespace specserve

int main(int argc, char** argv) { return specserve::Main(argc, argv); }
