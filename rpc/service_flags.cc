#include "rpc/service_flags.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "common/usable_cpus.h"
#include "rpc/cpu_affinity.h"
#include "rpc/tls.h"

namespace specserve::rpc {

void DeclareServerFlags(CliArgs& a, const std::string& default_listen, int default_metrics_port,
                        const std::string& what) {
  a.Flag("listen", default_listen, "HOST:PORT to serve gRPC on");
  a.Flag("metrics-port", std::to_string(default_metrics_port), "Prometheus /metrics port (0: off)");
  a.Flag("metrics-listen", "", "host /metrics listens on (default: the host of --listen)");
  a.Flag("max-sessions", "64", "concurrent " + what + "; more get RESOURCE_EXHAUSTED");
  a.Flag("max-message-bytes", std::to_string(64 << 20), "largest gRPC message accepted or sent");
  a.Flag("drain-seconds", "30", "on SIGTERM, how long running " + what + " may finish");
  a.Flag("log-format", "text",
         "text: \"PROGRAM: message key=value ...\" lines; json: one JSON object per line (ts, level, program, msg, "
         "request_id, trace_id, fields)");
  AddConnectionAgeFlags(a);
}

absl::Status ReadServerFlags(const CliArgs& a, ServerFlags* f) {
  f->server.listen = a.Str("listen");
  f->metrics_host = a.Str("metrics-listen");
  if (f->metrics_host.empty()) {
    const size_t colon = f->server.listen.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return absl::InvalidArgumentError(absl::StrCat("--listen ", f->server.listen, " is not HOST:PORT"));
    }
    f->metrics_host = f->server.listen.substr(0, colon);
  }
  ASSIGN_OR_RETURN(int64_t metrics_port, a.Int("metrics-port", 0, 65535));
  ASSIGN_OR_RETURN(int64_t max_sessions, a.Int("max-sessions", 1, 1 << 20));
  ASSIGN_OR_RETURN(int64_t max_bytes, a.Int("max-message-bytes", 1024, 1 << 30));
  ASSIGN_OR_RETURN(f->server.drain_seconds, a.Double("drain-seconds", 0, 3600));
  ASSIGN_OR_RETURN(f->log_format, log::ParseFormat(a.Str("log-format")));
  log::SetFormat(f->log_format);
  f->metrics_port = static_cast<int>(metrics_port);
  f->max_sessions = static_cast<int>(max_sessions);
  f->server.max_message_bytes = static_cast<int>(max_bytes);
  return ParseConnectionAgeFlags(a, &f->server);
}

void DeclareServiceFlags(CliArgs& a, const std::string& default_listen, int default_metrics_port) {
  DeclareServerFlags(a, default_listen, default_metrics_port, "sessions");
  a.Flag("model", "", "GGUF model file (required)");
  a.Flag("threads", "auto",
         "CPU threads for the forward pass; auto: the cores this service may use (the --cpus list, else its "
         "affinity mask), at most its cgroup's CPU quota (common/usable_cpus.h)");
  a.Flag("cpus", "",
         "pin the service to these cores, e.g. 0 or 2-3 (on a small machine: the draft and the target on cores of "
         "their own); empty: no pinning");
  a.Flag("kv-blocks", "0",
         "KV cache blocks of 16 positions (0: room for --max-sessions full contexts, within --kv-memory-mib and, on "
         "CUDA, the device's free memory)");
  a.Flag("kv-memory-mib", "0",
         "with --kv-blocks 0: the most memory the KV cache may take (0: 1024 on the CPU; on CUDA, what the device "
         "has free after the weights, less max(1 GiB, 10%) headroom)");
  a.Flag("backend", "cpu", "cpu or cuda");
  a.Flag("cpu-activations", "int8",
         "CPU matrix products of quantized weights: int8 (activations quantized to int8 per 32 values and integer "
         "dot products, as llama.cpp does: about twice fp32's decode speed, logits within ~0.2) or fp32 (exact "
         "products of the dequantized weights; matches the golden references). Unquantized weights compute in fp32 "
         "either way (docs/performance_model.md)");
  a.Flag("prefix-cache", "on",
         "on: sessions whose prompts start with the same whole KV blocks as a recent one reuse its keys and values "
         "instead of computing them (common/kv_cache.h); off: every prompt is computed");
  a.Flag("device", "0", "CUDA device index");
  a.Flag("queue-timeout-s", "10",
         "a session that does not fit the KV pool or --max-sessions waits this long, in arrival order, before "
         "RESOURCE_EXHAUSTED (0: refuse at once)");
  a.Flag("batch-gather-ms", "30",
         "before a pass, wait up to this long (and at most half the last pass) for the sessions the last pass "
         "served to send their next message, so they share one batched pass instead of splitting into cohorts "
         "that alternate (0: never wait)");
  a.Flag("prefill-chunk-tokens", "64",
         "while other sessions decode, a pass computes at most this many prompt tokens in all (oldest session "
         "first; the rest in the next passes), so a new prompt delays the running streams' next tokens by a bounded "
         "amount; a prompt with nobody decoding is prefilled in one pass (0: never chunked)");
  a.Flag("session-idle-timeout-s", "30",
         "a session with no message for this long ends (DEADLINE_EXCEEDED) and frees its KV reservation (0: never)");
  DeclareTlsFlags(a, TlsRole::kServer);
}

absl::StatusOr<ServiceFlags> ReadServiceFlags(const CliArgs& a) {
  ServiceFlags f;
  RETURN_IF_ERROR(ReadServerFlags(a, &f));
  f.model = a.Str("model");
  if (f.model.empty()) return absl::InvalidArgumentError("--model is required");
  ASSIGN_OR_RETURN(int64_t kv_blocks, a.Int("kv-blocks", 0, 1 << 30));
  ASSIGN_OR_RETURN(int64_t device, a.Int("device", 0, 64));
  ASSIGN_OR_RETURN(f.cpus, ParseCpuList(a.Str("cpus")));
  const int usable = UsableCpus(f.cpus.empty() ? AffinityCpus() : static_cast<int>(f.cpus.size()), CgroupCpuQuota());
  ASSIGN_OR_RETURN(const int threads, ThreadsFromFlag(a.Str("threads"), usable));
  const std::string prefix_cache = a.Str("prefix-cache");
  if (prefix_cache != "on" && prefix_cache != "off") return absl::InvalidArgumentError("--prefix-cache must be on or off");
  f.prefix_cache = prefix_cache == "on";
  f.backend.kind = a.Str("backend");
  f.backend.threads = threads;
  ASSIGN_OR_RETURN(f.backend.cpu_activations, ParseMatMulActivations(a.Str("cpu-activations")));
  f.backend.kv_blocks = static_cast<int32_t>(kv_blocks);
  f.backend.kv_contexts = f.max_sessions;
  ASSIGN_OR_RETURN(f.backend.kv_memory_mib, a.Int("kv-memory-mib", 0, int64_t{1} << 30));
  f.backend.device = static_cast<int>(device);
  ASSIGN_OR_RETURN(double gather_ms, a.Double("batch-gather-ms", 0, 10000));
  f.batch_gather = std::chrono::microseconds(static_cast<int64_t>(gather_ms * 1000));
  ASSIGN_OR_RETURN(f.prefill_chunk_tokens, a.Int("prefill-chunk-tokens", 0, 1 << 20));
  ASSIGN_OR_RETURN(double idle_s, a.Double("session-idle-timeout-s", 0, 24 * 3600));
  f.session_idle_timeout = std::chrono::milliseconds(static_cast<int64_t>(idle_s * 1000));
  ASSIGN_OR_RETURN(double queue_s, a.Double("queue-timeout-s", 0, 3600));
  f.queue_timeout = std::chrono::milliseconds(static_cast<int64_t>(queue_s * 1000));
  ASSIGN_OR_RETURN(f.server.tls, ReadTlsFlags(a));
  f.server.tls.allowed_clients = absl::StrSplit(a.Str("tls-allowed-clients"), ',', absl::SkipEmpty());
  return f;
}

int ParseServiceArgs(CliArgs& args, int argc, char** argv, const char* prog) {
  log::SetProgram(prog);
  if (absl::Status s = args.Parse(argc, argv); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n%s", prog, s.ToString().c_str(), args.HelpText().c_str());
    return 2;
  }
  if (args.help()) {
    std::fputs(args.HelpText().c_str(), stdout);
    return 0;
  }
  return -1;
}

}  // namespace specserve::rpc
