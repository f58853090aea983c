// The draft service (specserve.v1.DraftService): per-session proposals from
// the draft model. Proposing K tokens takes K dependent passes; each
// scheduler iteration runs the next step of every proposing session as one
// batched pass, so sessions join and leave the batch between steps
// (continuous batching at step granularity).
//
// A session: `open` -> prefill prompt[0..n-2] -> `opened`; then, in the
// order they arrive, `propose` (round r, k) feeds what the cache lacks of
// the committed sequence, samples d1..dK from q1..qK (the draft rule) and
// answers (r, d, q); `commit` (round r, n, x) applies round r's verdict and
// rolls the cache back (no answer); `ahead` (overlap) runs the steps of the
// next block on a guess, without an answer.
#pragma once

#include <deque>
#include <memory>
#include <utility>

#include "rpc/model_service.h"
#include "spec/draft_session.h"
#include "specserve/v1/internal.grpc.pb.h"

namespace specserve {

struct DraftStreamState : rpc::StreamState<DraftSession> {
  // `propose`, `commit` and `ahead` requests in arrival order.
  std::deque<std::pair<v1::DraftRequest, rpc::Clock::time_point>> queued;
  bool proposing = false;           // steps running: a proposal (answered when done) or...
  bool ahead = false;               // ...a block drafted ahead (not answered)
  int32_t last_proposed = 0;        // tokens in the last proposal answered
  rpc::Clock::time_point received;  // of the proposal in progress
};

class DraftServer final
    : public rpc::ModelService<v1::DraftService, v1::DraftRequest, v1::DraftResponse, DraftStreamState> {
 public:
  ~DraftServer() override { Stop(); }

 private:
  absl::Status Accept(uint64_t id, Entry& e, v1::DraftRequest msg, rpc::Clock::time_point received) override;
  bool Busy(const Entry& e) const override {
    return e.state.prefill_pending() || e.state.proposing || !e.state.queued.empty();
  }
  // The next draft step of a session that is proposing (or drafting ahead).
  absl::StatusOr<bool> NextPass(Entry& e, ForwardSeq* pass) override;
  absl::Status FinishPass(Entry& e, const ForwardSeq& pass, const float* logits) override;
  // The step's rule: the backend samples where it keeps the logits
  // (Backend::ForwardSample), so the draft never sees a logits row.
  const DraftSampleInput* PassSample(Entry& e) override { return e.state.session->sample_rule(); }
  absl::Status FinishSampledPass(Entry& e, const ForwardSeq& pass, DraftSample s) override;
  void AbortPass(Entry& e) override { e.state.session->AbortPropose(); }
  // Applies the queued commits at the front, then starts the proposal or
  // look-ahead after them, if any; an error when one is refused.
  absl::Status StartQueued(DraftStreamState& st);
  // The steps are done: answer a proposal, or just note a finished ahead block.
  void StepsDone(Entry& e);
};

}  // namespace specserve
