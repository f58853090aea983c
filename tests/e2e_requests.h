// What the failure and reliability tests send: requests on the bundled
// models, their greedy reference, sessions opened directly on the target (as
// a misbehaving internal client would), and waits on a service's metrics.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/tokenizer.h"
#include "common/weights.h"
#include "specserve/v1/internal.grpc.pb.h"
#include "tests/e2e_harness.h"

namespace specserve::e2e::failure {

using e2e::Metric;
using e2e::Scrape;

inline constexpr char kPrompt[] = "def fib(n):";

// Cluster options without designated initializers (-Wextra flags the omitted fields).
inline e2e::ClusterOptions Options(bool draft, std::vector<std::string> target_args,
                            std::vector<std::string> coordinator_args = {}) {
  e2e::ClusterOptions o;
  o.draft = draft;
  o.target_args = std::move(target_args);
  o.coordinator_args = std::move(coordinator_args);
  return o;
}

inline v1::GenerateRequest Request(int max_tokens, v1::Drafter drafter = v1::DRAFTER_MODEL) {
  v1::GenerateRequest req;
  req.set_text(kPrompt);
  req.set_max_tokens(max_tokens);
  req.set_drafter(drafter);
  req.set_k(4);
  return req;
}

inline std::vector<TokenId> PromptIds() {
  auto model = Model::Load(testing::BundledModel("code-target-7m.gguf"));
  auto tok = Tokenizer::FromGguf(*(*model)->file);
  return (*tok)->Encode(kPrompt, true);
}

inline std::vector<TokenId> Reference(int n) {
  return e2e::CachedGreedy(testing::BundledModel("code-target-7m.gguf"), PromptIds(), n, /*eos=*/2);
}

// A session opened directly on the target service, as the coordinator would.
struct DirectSession {
  DirectSession(const std::string& addr, std::vector<TokenId> prompt, int max_new_tokens) {
    stub = v1::TargetService::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
    stream = stub->Session(&ctx);
    v1::TargetRequest open;
    open.mutable_open()->mutable_prompt()->Add(prompt.begin(), prompt.end());
    open.mutable_open()->set_max_new_tokens(max_new_tokens);
    open.mutable_open()->mutable_sampling()->set_top_p(1);
    stream->Write(open);
  }
  // Reads the next answer; false with `status` set when the stream ended.
  bool Read(v1::TargetResponse* resp) {
    if (stream->Read(resp)) return true;
    status = stream->Finish();
    return false;
  }
  grpc::Status Close() {
    stream->WritesDone();
    v1::TargetResponse r;
    while (stream->Read(&r)) {
    }
    return status = stream->Finish();
  }
  grpc::ClientContext ctx;
  std::unique_ptr<v1::TargetService::Stub> stub;
  std::unique_ptr<grpc::ClientReaderWriter<v1::TargetRequest, v1::TargetResponse>> stream;
  grpc::Status status;
};

// n ids of the bundled 4096-token vocabulary after BOS (1), varied by salt so
// that no two prompts share a prefix the prefix cache could reuse.
inline std::vector<TokenId> DistinctPrompt(int n, int salt) {
  std::vector<TokenId> ids = {1};
  for (int i = 1; i < n; ++i) ids.push_back(static_cast<TokenId>(5 + (i * 37 + salt * 101) % 4000));
  return ids;
}

// The next round of a plain-decoding session (K = 0): one pass over its
// pending token.
inline void SendPlainRound(DirectSession& s, int64_t round) {
  v1::TargetRequest req;
  req.mutable_verify()->set_round(round);
  ASSERT_TRUE(s.stream->Write(req));
}

// The session's next answer: `opened` (its prefill is done) or a verdict.
inline void ExpectTargetAnswer(DirectSession& s, bool opened) {
  v1::TargetResponse resp;
  ASSERT_TRUE(s.Read(&resp)) << s.status.error_message();
  EXPECT_EQ(resp.has_opened(), opened);
  EXPECT_EQ(resp.has_verified(), !opened);
}

// Streams `req`; after the first delta calls `mid` (with the context, to cancel).
inline e2e::StreamResult GenerateWithHook(v1::Generation::Stub& stub, const v1::GenerateRequest& req,
                                   const std::function<void(grpc::ClientContext&)>& mid,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  e2e::StreamResult r;
  auto reader = stub.Generate(&ctx, req);
  v1::GenerateResponse msg;
  while (reader->Read(&msg)) {
    if (msg.has_delta()) {
      if (r.deltas++ == 0) mid(ctx);
      r.ids.insert(r.ids.end(), msg.delta().token_ids().begin(), msg.delta().token_ids().end());
    } else if (msg.has_final()) {
      r.final_seen = true;
      r.final = msg.final();
    }
  }
  r.status = reader->Finish();
  return r;
}

// Polls a service's /metrics until it reports no sessions and no KV blocks in use.
inline bool ServiceIdle(int metrics_port) {
  for (int i = 0; i < 250; ++i) {
    const std::string m = Scrape(metrics_port);
    if (Metric(m, "specserve_active_sessions") == 0 && Metric(m, "specserve_kv_blocks_used") == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace specserve::e2e::failure
