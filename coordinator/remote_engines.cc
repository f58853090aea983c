#include "coordinator/remote_engines.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/call_watchdog.h"
#include "rpc/proto_convert.h"
#include "rpc/status_convert.h"

namespace specserve {

bool CancelGroup::Add(grpc::ClientContext* ctx) {
  absl::MutexLock lock(&mu_);
  if (cancelled_) return false;
  contexts_.insert(ctx);
  return true;
}

void CancelGroup::Remove(grpc::ClientContext* ctx) {
  absl::MutexLock lock(&mu_);
  contexts_.erase(ctx);
}

void CancelGroup::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  for (grpc::ClientContext* ctx : contexts_) ctx->TryCancel();  // thread-safe, does not block
}

bool CancelGroup::cancelled() const {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

template <class Req, class Resp>
template <class StartFn>
absl::Status SyncSession<Req, Resp>::Open(StartFn start, const Req& open) {
  Close();
  ctx_ = std::make_unique<grpc::ClientContext>();
  ctx_->set_deadline(opts_.deadline);
  for (const auto& [key, value] : opts_.metadata) ctx_->AddMetadata(key, value);
  if (!opts_.cancel->Add(ctx_.get())) {
    ctx_.reset();
    return absl::CancelledError("request cancelled");
  }
  stream_ = start(ctx_.get());
  healthy_ = true;
  if (!stream_->Write(open)) return Broken("open");
  awaiting_opened_.store(true);
  open_allowance_ = std::chrono::milliseconds(
      static_cast<int64_t>(opts_.open_ms_per_token * static_cast<double>(open.open().prompt_size())));
  return absl::OkStatus();
}

template <class Req, class Resp>
absl::Status SyncSession<Req, Resp>::Broken(const char* what) {
  // A failed Write or Read means the call is over; Finish gives its status.
  healthy_ = false;
  absl::Status s = rpc::FromGrpc(stream_->Finish());
  stream_.reset();
  opts_.cancel->Remove(ctx_.get());
  if (s.ok()) s = absl::UnavailableError("session ended by the service");
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

template <class Req, class Resp>
SyncSession<Req, Resp>::Limit::~Limit() {
  if (ticket) CallWatchdog::Get().Disarm(ticket);
}

template <class Req, class Resp>
void SyncSession<Req, Resp>::Arm(Limit& limit) {
  if (opts_.call_timeout.count() <= 0) return;
  limit.when = std::chrono::steady_clock::now() + opts_.call_timeout +
               (awaiting_opened_.load() ? open_allowance_ : std::chrono::milliseconds(0));
  limit.ticket = CallWatchdog::Get().Arm(ctx_.get(), limit.when);
}

template <class Req, class Resp>
absl::Status SyncSession<Req, Resp>::Cut(const Limit& limit, absl::Status s, const char* what) const {
  if (std::chrono::steady_clock::now() < limit.when || opts_.cancel->cancelled()) return s;
  return absl::DeadlineExceededError(absl::StrCat(what, ": no answer within the draft's time limit (",
                                                  opts_.call_timeout.count(), " ms, --draft-timeout-ms)"));
}

template <class Req, class Resp>
absl::Status SyncSession<Req, Resp>::AwaitOpened() {
  if (!stream_) return absl::FailedPreconditionError("session is not open");
  if (!awaiting_opened_.load()) return absl::OkStatus();
  Limit limit;
  Arm(limit);
  Resp resp;
  if (!stream_->Read(&resp)) return Cut(limit, absl::UnavailableError("open: the service ended the session"), "open");
  if (!resp.has_opened()) return absl::InternalError("service did not acknowledge open");
  awaiting_opened_.store(false);
  return absl::OkStatus();
}

template <class Req, class Resp>
absl::StatusOr<Resp> SyncSession<Req, Resp>::Call(const Req& req) {
  if (!stream_) return absl::FailedPreconditionError("session is not open");
  // Armed for the whole exchange (write, the pending `opened`, the answer).
  Limit limit;
  Arm(limit);
  auto broken = [&](const char* what) { return Cut(limit, Broken(what), what); };
  if (!stream_->Write(req)) return broken("write");
  Resp resp;
  if (awaiting_opened_.load()) {
    if (!stream_->Read(&resp)) return broken("open");
    if (!resp.has_opened()) return absl::InternalError("service did not acknowledge open");
    awaiting_opened_.store(false);
  }
  if (!stream_->Read(&resp)) return broken("read");
  return resp;
}

template <class Req, class Resp>
void SyncSession<Req, Resp>::Close() {
  if (stream_) {
    // Healthy: half-close and wait for the service's OK (it frees the session
    // first). Otherwise cancel: Finish then returns at once.
    if (healthy_ && stream_->WritesDone()) {
      Resp unread;  // an `opened` not yet read: drain before Finish, as gRPC asks
      while (stream_->Read(&unread)) {
      }
    } else {
      ctx_->TryCancel();
    }
    stream_->Finish();
    stream_.reset();
  }
  if (ctx_) opts_.cancel->Remove(ctx_.get());
  ctx_.reset();
  healthy_ = false;
}

template class SyncSession<v1::TargetRequest, v1::TargetResponse>;
template class SyncSession<v1::DraftRequest, v1::DraftResponse>;

absl::Status RemoteVerifier::Open(const SessionSpec& spec) {
  v1::TargetRequest req;
  *req.mutable_open() = rpc::SpecToProto(spec);
  logprobs_ = spec.logprobs;
  return session_.Open([&](grpc::ClientContext* ctx) { return stub_->Session(ctx); }, req);
}

absl::StatusOr<RoundResult> RemoteVerifier::Verify(int64_t round, const Proposal& p) {
  v1::TargetRequest req;
  v1::VerifyRequest* v = req.mutable_verify();
  v->set_round(round);
  rpc::ProposalToProto(p, v->mutable_tokens(), v->mutable_dists());
  ASSIGN_OR_RETURN(v1::TargetResponse resp, session_.Call(req));
  if (!resp.has_verified() || resp.verified().round() != round) {
    return absl::InternalError(absl::StrCat("target answered round ", resp.verified().round(), " to round ", round));
  }
  const v1::VerifyResult& r = resp.verified();
  RoundResult out{r.round(), r.accepted(), r.next_token(), r.compute_seconds()};
  if (r.has_load()) {
    out.target_load = rpc::TargetLoadFromProto(r.load());
  }
  if (logprobs_) {
    ASSIGN_OR_RETURN(out.logprobs, rpc::LogprobsFromProto(r.logprobs()));
    if (static_cast<int32_t>(out.logprobs.size()) != r.accepted() + 1) {
      return absl::InternalError(absl::StrCat("target sent ", out.logprobs.size(), " logprobs for ",
                                              r.accepted() + 1, " committed tokens"));
    }
  }
  return out;
}

absl::Status RemoteDrafter::Open(const SessionSpec& spec) {
  v1::DraftRequest req;
  *req.mutable_open() = rpc::SpecToProto(spec);
  return session_.Open([&](grpc::ClientContext* ctx) { return stub_->Session(ctx); }, req);
}

absl::Status RemoteDrafter::Commit(const Verdict& v) {
  if (!session_.open()) return absl::FailedPreconditionError("session is not open");
  v1::DraftRequest req;
  v1::Commit* c = req.mutable_commit();
  c->set_round(v.round);
  c->set_accepted(v.accepted);
  c->set_next_token(v.next_token);
  session_.Send(req);
  return absl::OkStatus();
}

absl::StatusOr<Proposal> RemoteDrafter::Propose(int64_t round, int32_t k) {
  v1::DraftRequest req;
  v1::ProposeRequest* p = req.mutable_propose();
  p->set_round(round);
  p->set_k(k);
  ASSIGN_OR_RETURN(v1::DraftResponse resp, session_.Call(req));
  if (!resp.has_proposal() || resp.proposal().round() != round) {
    return absl::InternalError(absl::StrCat("draft answered round ", resp.proposal().round(), " to round ", round));
  }
  ASSIGN_OR_RETURN(Proposal out, rpc::ProposalFromProto(resp.proposal().tokens(), resp.proposal().dists()));
  out.compute_seconds = resp.proposal().compute_seconds();
  out.drafted_ahead = resp.proposal().drafted_ahead();
  out.looked_up = resp.proposal().looked_up();
  return out;
}

void RemoteDrafter::PrepareAhead(int32_t k) {
  if (k <= 0) return;
  v1::DraftRequest req;
  req.mutable_ahead()->set_k(k);
  session_.Send(req);
}

}  // namespace specserve
