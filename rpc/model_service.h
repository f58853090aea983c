// What the draft and target services share above SessionService: the gRPC
// service they implement (its `Session` stream and `GetModelInfo`), opening a
// role session with its prompt's prefill, and the per-iteration pass buffers.
// Service is the generated service class (v1::DraftService, ...), RoleSession
// the per-session engine (DraftSession, TargetSession), State the role's
// per-session state; State holds `session` (a unique_ptr<RoleSession>),
// `prefill`, `prefill_pending` and `opened_at`.
//
// A role server derives from this, and its destructor must call Stop() (the
// scheduler thread calls the role's hooks until then).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status_macros.h"
#include "rpc/session_service.h"
#include "specserve/v1/internal.grpc.pb.h"

namespace specserve::rpc {

template <class Service, class Req, class Resp, class State, class RoleSession>
class ModelService : public Service::CallbackService, public SessionService<Req, Resp, State> {
  using Base = SessionService<Req, Resp, State>;

 public:
  using Entry = typename Base::Entry;

  grpc::ServerBidiReactor<Req, Resp>* Session(grpc::CallbackServerContext* ctx) override {
    return new BidiSession<Req, Resp, &IsClose>(ctx, this, this->NextStreamId());
  }

  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* ctx, const v1::ModelInfoRequest*,
                                         v1::ModelInfo* resp) override {
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    if (!this->ready()) {
      r->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "model is still loading"));
    } else {
      *resp = info_;
      r->Finish(grpc::Status::OK);
    }
    return r;
  }

  void SetInfo(const v1::ModelInfo& info) { info_ = info; }

 protected:
  // Opens the role session on SPEC; its prompt's prefill becomes a pending
  // pass, or, for a one-token prompt (nothing to cache), `opened` is answered
  // at once.
  absl::Status InitState(Entry& e, const SessionSpec& spec) override {
    State& st = e.state;
    st.session = std::make_unique<RoleSession>(this->backend().kv_pool(), this->backend().config());
    RETURN_IF_ERROR(st.session->Open(spec, &st.prefill));
    st.opened_at = Clock::now();
    st.prefill_pending = !st.prefill.tokens.empty();
    if (!st.prefill_pending) {
      Resp r;
      r.mutable_opened();
      e.handle->Send(std::move(r));
    }
    return absl::OkStatus();
  }

  // Before the batch: a session still opening runs its prefill as this
  // iteration's pass (true); false when its prefill is done.
  bool TakePrefill(uint64_t id, State& st) {
    if (!st.prefill_pending) return false;
    st.pass = State::Pass::kPrefill;
    passes_.push_back(st.prefill);
    pass_ids_.push_back(id);
    return true;
  }
  // After the batch: a session whose pass was its prefill is answered
  // `opened` (true); false for any other pass.
  bool AnswerPrefill(Entry& e) {
    State& st = e.state;
    if (st.pass != State::Pass::kPrefill) return false;
    st.prefill_pending = false;
    Resp r;
    r.mutable_opened()->set_compute_seconds(SecondsSince(st.opened_at));
    e.handle->Send(std::move(r));
    return true;
  }

  // This iteration's batch: one pass per session, pass_ids_[i] owning
  // passes_[i], and its output.
  std::vector<ForwardSeq> passes_;
  std::vector<uint64_t> pass_ids_;
  BatchOutput out_;

 private:
  static bool IsClose(const Req& r) { return r.has_close(); }

  v1::ModelInfo info_;
};

}  // namespace specserve::rpc
