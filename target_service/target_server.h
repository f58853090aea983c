// The target service (specserve.v1.TargetService): per-session verification
// on the target model, many sessions' verify passes batched into one forward
// pass per scheduler iteration.
//
// A session: `open` -> prefill prompt[0..n-2] -> `opened`; then each
// `verify` (round r, d1..dK, q1..qK) runs the pass over [pending, d1..dK],
// the verify-and-resample rule (common/verify.h), rolls the KV cache back to
// the committed sequence and answers (r, n accepted, next token).
#pragma once

#include <deque>
#include <memory>
#include <utility>

#include "rpc/session_service.h"
#include "specserve/v1/internal.grpc.pb.h"
#include "target_service/target_session.h"

namespace specserve {

struct TargetState {
  std::unique_ptr<TargetSession> session;
  bool prefill_pending = false;
  ForwardSeq prefill;
  rpc::Clock::time_point opened_at;
  std::deque<std::pair<v1::VerifyRequest, rpc::Clock::time_point>> queued;  // verify requests in order
  rpc::Clock::time_point received;  // of the request in this iteration's pass
  enum class Pass { kNone, kPrefill, kVerify } pass = Pass::kNone;
};

inline bool IsTargetClose(const v1::TargetRequest& r) { return r.has_close(); }

class TargetServer final
    : public v1::TargetService::CallbackService,
      public rpc::SessionService<v1::TargetRequest, v1::TargetResponse, TargetState> {
 public:
  ~TargetServer() override { Stop(); }

  grpc::ServerBidiReactor<v1::TargetRequest, v1::TargetResponse>* Session(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* ctx, const v1::ModelInfoRequest* req,
                                         v1::ModelInfo* resp) override;
  void SetInfo(const v1::ModelInfo& info) { info_ = info; }

 private:
  absl::Status InitState(Entry& e, const SessionSpec& spec) override;
  absl::Status Accept(uint64_t id, Entry& e, v1::TargetRequest msg, rpc::Clock::time_point received) override;
  bool HasWork() const override;
  void Iterate() override;

  v1::ModelInfo info_;
  std::vector<ForwardSeq> passes_;
  std::vector<uint64_t> pass_ids_;
  rpc::BatchOutput out_;
};

}  // namespace specserve
