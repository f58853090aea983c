// The flags of specserve's servers, declared and read in one place: what
// every server takes (listen address, metrics, session and message limits,
// drain, connection age), and what the model services add (model, backend,
// KV pool, TLS).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/backend.h"
#include "common/cli_args.h"
#include "common/log.h"
#include "rpc/grpc_server.h"

namespace specserve::rpc {

struct ServerFlags {
  ServerOptions server;
  std::string metrics_host;  // --metrics-listen, else the host of --listen
  int metrics_port = 0;
  int max_sessions = 64;
  log::Format log_format = log::Format::kText;  // --log-format (applied by ReadServerFlags)
};

// Declares --listen, --metrics-port, --max-sessions, --max-message-bytes,
// --drain-seconds, --log-format and the connection-age flags; `what` names what
// --listen serves and what --max-sessions counts ("sessions", "requests").
void DeclareServerFlags(CliArgs& args, const std::string& default_listen, int default_metrics_port,
                        const std::string& what);
absl::Status ReadServerFlags(const CliArgs& args, ServerFlags* f);

struct ServiceFlags : ServerFlags {
  std::string model;
  BackendOptions backend;
  std::chrono::milliseconds session_idle_timeout{30000};
  std::chrono::milliseconds queue_timeout{10000};
  std::vector<int> cpus;  // --cpus: cores to pin the process to (empty: no pinning)
  bool prefix_cache = true;  // --prefix-cache: share the KV blocks of common prompt prefixes
  // --batch-gather-ms: how long a pass may wait for the sessions the last
  // pass served (rpc/session_service.h "Gather").
  std::chrono::microseconds batch_gather{30000};
  // --prefill-chunk-tokens: prompt tokens a pass computes in all while other
  // sessions decode (rpc/model_service.h SetPrefillChunk; 0: unlimited).
  int64_t prefill_chunk_tokens = 64;
};

// Declares the server flags and --model, --threads, --cpus, --kv-blocks, --backend,
// --device, --tls-cert, --tls-key, --tls-ca (ReadServiceFlags reads the PEM
// files into server.tls, so a missing one fails at start).
void DeclareServiceFlags(CliArgs& args, const std::string& default_listen, int default_metrics_port);
absl::StatusOr<ServiceFlags> ReadServiceFlags(const CliArgs& args);

// Parses flags for a service binary; prints help or errors. Returns the
// exit code to use now, or -1 to go on. Names the process's log lines `prog`.
int ParseServiceArgs(CliArgs& args, int argc, char** argv, const char* prog);

}  // namespace specserve::rpc
