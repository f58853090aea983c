// The target service (specserve.v1.TargetService): per-session verification
// on the target model, many sessions' verify passes batched into one forward
// pass per scheduler iteration.
//
// A session: `open` -> prefill prompt[0..n-2] -> `opened`; then each
// `verify` (round r, d1..dK, q1..qK) runs the pass over [pending, d1..dK],
// the verify-and-resample rule (spec/verify.h) where the backend keeps the
// logits (Backend::ForwardVerify), rolls the KV cache back to
// the committed sequence and answers (r, n accepted, next token).
#pragma once

#include <deque>
#include <memory>
#include <utility>

#include "rpc/model_service.h"
#include "spec/target_session.h"
#include "specserve/v1/internal.grpc.pb.h"

namespace specserve {

struct TargetStreamState : rpc::StreamState<TargetSession> {
  std::deque<std::pair<v1::VerifyRequest, rpc::Clock::time_point>> queued;  // verify requests in order
  rpc::Clock::time_point received;  // of the request in this iteration's pass
};

class TargetServer final
    : public rpc::ModelService<v1::TargetService, v1::TargetRequest, v1::TargetResponse, TargetStreamState> {
 public:
  ~TargetServer() override { Stop(); }

 private:
  absl::Status Accept(uint64_t id, Entry& e, v1::TargetRequest msg, rpc::Clock::time_point received) override;
  bool Busy(const Entry& e) const override { return e.state.prefill_pending() || !e.state.queued.empty(); }
  // The verify pass of the session's oldest queued request.
  absl::StatusOr<bool> NextPass(Entry& e, ForwardSeq* pass) override;
  absl::Status FinishPass(Entry& e, const ForwardSeq& pass, const float* logits) override;
  // The round's block goes to the backend's verify step (on CUDA: on the
  // device); the session alone decides whether it needs host logits instead.
  const VerifyInput* PassVerify(Entry& e) override { return e.state.session->verify_block(); }
  absl::Status FinishVerifiedPass(Entry& e, const ForwardSeq& pass, const VerifyResult& v) override;
  absl::Status Answer(Entry& e, const ForwardSeq& pass, RoundResult v);  // the verified round's reply
  void AbortPass(Entry& e) override { e.state.session->AbortVerify(); }
};

}  // namespace specserve
