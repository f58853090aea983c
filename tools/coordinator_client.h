// The client side of specserve.v1.Generation for the `specserve client` and
// `specserve serve-bench` commands: request flags, one streamed request, and
// a one-line summary of its statistics.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/cli_args.h"
#include "specserve/v1/generation.grpc.pb.h"

namespace specserve::cli {

// A plaintext channel to the coordinator's public port.
std::unique_ptr<v1::Generation::Stub> ConnectCoordinator(const std::string& addr);

// --max-tokens, --temperature, --top-k, --top-p, --seed, --drafter, --k, --stop.
void AddRequestFlags(CliArgs& args);
// The request those flags describe (no prompt yet).
absl::StatusOr<v1::GenerateRequest> RequestFromFlags(const CliArgs& args);

struct Streamed {
  v1::Final final;
  int deltas = 0;
};

// Streams `req`, calling on_delta for every Delta; the Final message, or the
// RPC's error as a Status. `timeout_s` is the call's deadline.
absl::StatusOr<Streamed> GenerateStreaming(v1::Generation::Stub& stub, const v1::GenerateRequest& req,
                                           double timeout_s, const std::function<void(const v1::Delta&)>& on_delta);

// "24 tokens in 0.035 s (680 tokens/s) ... draft 20% / verify 60% / network 20%".
std::string FormatStats(const v1::GenerationStats& s);

}  // namespace specserve::cli
