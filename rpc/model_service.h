// What the draft and target services share above SessionService: the gRPC
// service they implement (its `Session` stream and `GetModelInfo`), opening a
// role session with its prompt's prefill, and the scheduler's iteration: one
// batched forward pass over every session that has a pass to run.
//
// Service is the generated service class (v1::DraftService, ...), State the
// role's per-stream state, derived from StreamState<RoleSession> where
// RoleSession is the spec/ session (DraftSession, TargetSession). A role says
// which pass a session needs next (NextPass) and what its logits mean
// (FinishPass); the loop over sessions, the batch and the errors are here.
//
// A role server derives from this, and its destructor must call Stop() (the
// scheduler thread calls the role's hooks until then).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/status_macros.h"
#include "rpc/pass_cost.h"
#include "rpc/session_service.h"
#include "specserve/v1/internal.grpc.pb.h"

namespace specserve::rpc {

// What every role keeps per stream: the spec/ session and its prefill.
template <class RoleSession>
struct StreamState {
  std::unique_ptr<RoleSession> session;
  // What is left of the prompt's prefill (chunked prefill computes it a
  // chunk per pass); `opened` is answered when it is empty.
  ForwardSeq prefill;
  bool prefill_pending() const { return !prefill.tokens.empty(); }
  Clock::time_point opened_at;
  enum class Pass { kNone, kPrefill, kRole } pass = Pass::kNone;  // in this iteration's batch
};

template <class Service, class Req, class Resp, class State>
class ModelService : public Service::CallbackService, public SessionService<Req, Resp, State> {
  using Base = SessionService<Req, Resp, State>;
  using RoleSession = typename decltype(State::session)::element_type;

 public:
  using Entry = typename Base::Entry;

  grpc::ServerBidiReactor<Req, Resp>* Session(grpc::CallbackServerContext* ctx) override {
    if (grpc::Status s = CheckClientAllowed(tls_, *ctx); !s.ok()) return new RefusedStream<Req, Resp>(s);
    const uint64_t id = this->NextStreamId();
    this->NoteStream(id, *ctx);
    return new BidiSession<Req, Resp, &IsClose>(ctx, this, id);
  }

  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* ctx, const v1::ModelInfoRequest*,
                                         v1::ModelInfo* resp) override {
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    if (grpc::Status s = CheckClientAllowed(tls_, *ctx); !s.ok()) {
      r->Finish(s);
    } else if (!this->ready()) {
      r->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "model is still loading"));
    } else {
      *resp = info_;
      r->Finish(grpc::Status::OK);
    }
    return r;
  }

  void SetInfo(const v1::ModelInfo& info) { info_ = info; }
  // Chunked prefill (--prefill-chunk-tokens): while some session is past its
  // prefill (decoding: its stream waits on this service's passes), a pass
  // computes at most `tokens` prompt tokens in all, the oldest session's
  // first, so a new prompt lengthens the passes of the streams already
  // running by a bounded amount instead of one pass as long as its whole
  // prefill. The rest of the prompt follows in the next passes. With no
  // session decoding, a prompt is prefilled in one pass (nothing to protect;
  // each extra pass reads the weights again). 0: never chunked. Call before
  // Attach.
  void SetPrefillChunk(int64_t tokens) { prefill_chunk_ = tokens; }
  // Before serving: with mutual TLS, only clients whose certificate names
  // one of tls.allowed_clients open sessions or read the model info.
  void SetTls(const TlsConfig& tls) { tls_ = tls; }

 protected:
  // This service's measured pass cost and load (scheduler thread).
  TargetLoad PassCost() const { return pass_cost_.Estimate(); }

  // Opens the role session on SPEC; its prompt's prefill becomes a pending
  // pass, or, for a one-token prompt (nothing to cache), `opened` is answered
  // at once.
  absl::Status InitState(Entry& e, const SessionSpec& spec) override {
    State& st = e.state;
    st.session = std::make_unique<RoleSession>(this->backend().kv_pool(), this->backend().config());
    RETURN_IF_ERROR(st.session->Open(spec, &st.prefill));
    st.opened_at = Clock::now();
    if (!st.prefill_pending()) {
      Resp r;
      r.mutable_opened();
      e.handle->Send(std::move(r));
    }
    return absl::OkStatus();
  }

  // Role hooks, on the scheduler thread, for a session whose prefill is done.
  // The pass the session needs in this iteration (false: none); an error
  // ends the session.
  virtual absl::StatusOr<bool> NextPass(Entry& e, ForwardSeq* pass) = 0;
  // logits: [pass.n_logits, vocab], the pass's output rows.
  virtual absl::Status FinishPass(Entry& e, const ForwardSeq& pass, const float* logits) = 0;
  // The verify block of the pass NextPass just gave, for the backend's
  // verify step (Backend::ForwardVerify); nullptr: FinishPass gets its logits.
  virtual const VerifyInput* PassVerify(Entry& e) { return nullptr; }
  // A pass with a verify block: what the backend's verify step decided.
  virtual absl::Status FinishVerifiedPass(Entry& e, const ForwardSeq& pass, const VerifyResult& v) {
    return absl::InternalError("this service gives no verify blocks");
  }
  // The draft rule of the pass NextPass just gave, for the backend's
  // sampling step (Backend::ForwardSample); nullptr: FinishPass gets its logits.
  virtual const DraftSampleInput* PassSample(Entry& e) { return nullptr; }
  // A pass with a draft rule: the token and q the backend's sampling step drew.
  virtual absl::Status FinishSampledPass(Entry& e, const ForwardSeq& pass, DraftSample s) {
    return absl::InternalError("this service gives no draft rules");
  }
  // The pass failed; the session ends after this.
  virtual void AbortPass(Entry& e) = 0;

  // One batched pass: each session's prefill or its role's next pass.
  void Iterate() final {
    passes_.clear();
    pass_ids_.clear();
    verify_.clear();
    sample_.clear();
    std::vector<std::pair<uint64_t, absl::Status>> failed;
    bool decoding = false;
    for (const auto& [id, e] : this->sessions_) decoding = decoding || !e.state.prefill_pending();
    int64_t prefill_left = prefill_chunk_ > 0 && decoding ? prefill_chunk_ : INT64_MAX;
    for (auto& [id, e] : this->sessions_) {
      State& st = e.state;
      st.pass = State::Pass::kNone;
      ForwardSeq pass;
      if (st.prefill_pending()) {
        // The first `take` tokens of what is left of the prompt; the
        // logits (if the role wants any) only with its last chunk.
        const int64_t left = static_cast<int64_t>(st.prefill.tokens.size());
        const int64_t take = std::min(left, prefill_left);
        if (take == 0) continue;  // this pass's prefill budget is spent: the next one
        prefill_left -= take;
        st.pass = State::Pass::kPrefill;
        pass = ForwardSeq{st.prefill.kv, st.prefill.tokens.subspan(0, static_cast<size_t>(take)),
                          take == left ? st.prefill.n_logits : 0};
      } else {
        absl::StatusOr<bool> wanted = NextPass(e, &pass);
        if (!wanted.ok()) failed.emplace_back(id, wanted.status());
        if (!wanted.ok() || !*wanted) continue;
        st.pass = State::Pass::kRole;
      }
      passes_.push_back(pass);
      pass_ids_.push_back(id);
      verify_.push_back(st.pass == State::Pass::kRole ? PassVerify(e) : nullptr);
      sample_.push_back(st.pass == State::Pass::kRole ? PassSample(e) : nullptr);
    }
    RunBatch(this->backend(), passes_, verify_, sample_, this->metrics(), &out_);
    ObservePassCost();
    const int64_t vocab = this->backend().config().vocab;
    for (size_t i = 0; i < passes_.size(); ++i) {
      Entry& e = this->sessions_.at(pass_ids_[i]);
      absl::Status s = out_.status[i];
      if (!s.ok()) {
        if (e.state.pass == State::Pass::kRole) AbortPass(e);
      } else if (e.state.pass == State::Pass::kPrefill) {
        e.state.prefill.tokens.remove_prefix(passes_[i].tokens.size());
        if (!e.state.prefill_pending()) AnswerPrefill(e);
      } else if (verify_[i] != nullptr) {
        s = FinishVerifiedPass(e, passes_[i], out_.results[i]);
      } else if (sample_[i] != nullptr) {
        s = FinishSampledPass(e, passes_[i], std::move(out_.samples[i]));
      } else {
        s = FinishPass(e, passes_[i], out_.logits.data() + out_.first_row[i] * vocab);
      }
      if (!s.ok()) failed.emplace_back(pass_ids_[i], s);
    }
    for (auto& [id, s] : failed) this->EndSession(id, ToGrpc(s));
  }

 private:
  void AnswerPrefill(Entry& e) {
    Resp r;
    r.mutable_opened()->set_compute_seconds(SecondsSince(e.state.opened_at));
    e.handle->Send(std::move(r));
  }

  // Feeds a fully successful decoding batch (no prefill in it) to the
  // pass-cost model.
  void ObservePassCost() {
    int64_t tokens = 0;
    for (size_t i = 0; i < passes_.size(); ++i) {
      if (!out_.status[i].ok() || this->sessions_.at(pass_ids_[i]).state.pass == State::Pass::kPrefill) return;
      tokens += static_cast<int64_t>(passes_[i].tokens.size());
    }
    pass_cost_.Observe(tokens, static_cast<int64_t>(passes_.size()), out_.seconds);
  }

  static bool IsClose(const Req& r) { return r.has_close(); }

  // This iteration's batch: pass_ids_[i] owns passes_[i]; and its output.
  std::vector<ForwardSeq> passes_;
  std::vector<uint64_t> pass_ids_;
  std::vector<const VerifyInput*> verify_;  // [passes]: PassVerify's block or nullptr
  std::vector<const DraftSampleInput*> sample_;  // [passes]: PassSample's rule or nullptr
  BatchOutput out_;
  PassCostModel pass_cost_;
  int64_t prefill_chunk_ = 0;  // SetPrefillChunk
  v1::ModelInfo info_;
  TlsConfig tls_;
};

}  // namespace specserve::rpc
