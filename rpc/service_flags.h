// The flags every model service takes (listen address, model, backend, KV
// pool, limits, TLS, connection age), declared and read in one place.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "common/backend.h"
#include "common/cli_args.h"
#include "rpc/grpc_server.h"

namespace specserve::rpc {

struct ServiceFlags {
  ServerOptions server;
  std::string model;
  BackendOptions backend;
  int metrics_port = 0;
  int max_sessions = 64;
};

// Declares --listen, --model, --threads, --metrics-port, --max-sessions,
// --kv-blocks, --max-message-bytes, --drain-seconds, --backend, --device,
// --tls-cert, --tls-key, --tls-ca (ReadServiceFlags reads the PEM files into
// server.tls, so a missing one fails at start).
void DeclareServiceFlags(CliArgs& args, const std::string& default_listen, int default_metrics_port);
absl::StatusOr<ServiceFlags> ReadServiceFlags(const CliArgs& args);

// Parses flags for a service binary; prints help or errors. Returns the
// exit code to use now, or -1 to go on.
int ParseServiceArgs(CliArgs& args, int argc, char** argv, const char* prog);

}  // namespace specserve::rpc
