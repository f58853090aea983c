// The flags and start-up shared by the two model services: parse the common
// flags, load the GGUF, build the backend and describe the model (tokenizer
// included) for GetModelInfo.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/backend.h"
#include "common/cli_args.h"
#include "common/weights.h"
#include "rpc/server_runner.h"
#include "specserve/v1/internal.pb.h"

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

struct ModelHost {
  std::unique_ptr<Model> model;
  std::unique_ptr<Backend> backend;
  v1::ModelInfo info;

  static absl::StatusOr<std::unique_ptr<ModelHost>> Load(const ServiceFlags& flags);
};

// Parses flags for a service binary; prints help or errors. Returns the
// exit code to use now, or -1 to go on.
int ParseServiceArgs(CliArgs& args, int argc, char** argv, const char* prog);

}  // namespace specserve::rpc
