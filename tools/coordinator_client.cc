#include "tools/coordinator_client.h"

#include <chrono>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "coordinator/drafters.h"
#include "rpc/status_convert.h"

namespace specserve::cli {

std::unique_ptr<v1::Generation::Stub> ConnectCoordinator(const std::string& addr) {
  return v1::Generation::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
}

void AddRequestFlags(CliArgs& args) {
  args.Flag("max-tokens", "128", "tokens to generate at most");
  args.Flag("temperature", "0", "sampling temperature; 0 is greedy");
  args.Flag("top-k", "0", "keep the k most likely tokens (0: off)");
  args.Flag("top-p", "1", "nucleus sampling mass (1: off)");
  args.Flag("seed", "0", "random seed (same seed, same output)");
  args.Flag("drafter", "model", "model, ngram or none (plain target decoding)");
  args.Flag("k", "", "tokens drafted per round (0..16) or 'adaptive' (default: the coordinator's)");
  args.Flag("stop", "", "a stop string (the text ends before it)");
}

absl::StatusOr<v1::GenerateRequest> RequestFromFlags(const CliArgs& args) {
  v1::GenerateRequest req;
  ASSIGN_OR_RETURN(int64_t max_tokens, args.Int("max-tokens", 1, 1 << 20));
  ASSIGN_OR_RETURN(double temperature, args.Double("temperature", 0, 100));
  ASSIGN_OR_RETURN(int64_t top_k, args.Int("top-k", 0, 1 << 30));
  ASSIGN_OR_RETURN(double top_p, args.Double("top-p", 0, 1));
  ASSIGN_OR_RETURN(int64_t seed, args.Int("seed", 0, INT64_MAX));
  req.set_max_tokens(static_cast<int32_t>(max_tokens));
  req.set_temperature(static_cast<float>(temperature));
  req.set_top_k(static_cast<int32_t>(top_k));
  req.set_top_p(static_cast<float>(top_p));
  req.set_seed(static_cast<uint64_t>(seed));
  ASSIGN_OR_RETURN(v1::Drafter drafter, ParseDrafter(args.Str("drafter")));
  req.set_drafter(drafter);
  if (args.Str("k") == "adaptive") {
    req.set_adaptive_k(true);
  } else if (args.Given("k")) {
    ASSIGN_OR_RETURN(int64_t k, args.Int("k", 0, kMaxRoundK));
    req.set_k(static_cast<int32_t>(k));
  }
  if (args.Given("stop")) req.add_stop(args.Str("stop"));
  return req;
}

absl::StatusOr<Streamed> GenerateStreaming(v1::Generation::Stub& stub, const v1::GenerateRequest& req,
                                           double timeout_s, const std::function<void(const v1::Delta&)>& on_delta) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  auto reader = stub.Generate(&ctx, req);
  Streamed out;
  bool final_seen = false;
  v1::GenerateResponse msg;
  while (reader->Read(&msg)) {
    if (msg.has_delta()) {
      ++out.deltas;
      on_delta(msg.delta());
    } else if (msg.has_final()) {
      out.final = msg.final();
      final_seen = true;
    }
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) return rpc::FromGrpc(s);
  if (!final_seen) return absl::InternalError("the stream ended without a final message");
  return out;
}

std::string FormatStats(const v1::GenerationStats& s) {
  const double round = s.draft_seconds() + s.verify_seconds() + s.network_seconds();
  auto share = [&](double x) { return round > 0 ? 100 * x / round : 0.0; };
  return absl::StrFormat(
      "%d tokens in %.3f s (%.0f tokens/s), time to first token %.1f ms, drafter %s: %d of %d drafted accepted "
      "(%.3f), %.2f tokens per target pass over %d rounds, last K %d, fallbacks %d; round time: draft %.0f%% / "
      "verify %.0f%% / network %.0f%%",
      s.tokens(), s.total_seconds(), s.tokens_per_second(), s.time_to_first_token_seconds() * 1e3, s.drafter(),
      s.accepted(), s.drafted(), s.acceptance_rate(), s.rounds() ? static_cast<double>(s.tokens()) / s.rounds() : 0,
      s.rounds(), s.last_k(), s.fallbacks(), share(s.draft_seconds()), share(s.verify_seconds()),
      share(s.network_seconds()));
}

}  // namespace specserve::cli
