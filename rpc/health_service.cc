#include "rpc/health_service.h"

namespace specserve::rpc {

using grpc::health::v1::HealthCheckRequest;

// One Watch stream: writes the status now and after every change (only the
// latest when changes come faster than writes); finishes on cancel, on a
// failed write, or at Shutdown. All its state is guarded by the service's mu_.
class HealthService::Watcher final : public grpc::ServerWriteReactor<Response> {
 public:
  // Registers itself.
  // `whole_server`: it asked for ""; otherwise SERVICE_UNKNOWN, for good.
  Watcher(HealthService* svc, bool whole_server) ABSL_EXCLUSIVE_LOCKS_REQUIRED(svc->mu_)
      : svc_(svc), whole_server_(whole_server) {
    svc->watchers_.insert(this);
    AssertLockHeld();
    SendLocked(whole_server ? svc_->StatusLocked() : Response::SERVICE_UNKNOWN);
  }

  bool whole_server() const { return whole_server_; }

  // Tells the analysis that the service's lock, held by a caller that knows
  // it as its own mu_, is this watcher's svc_->mu_ (a check, too).
  void AssertLockHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK(svc_->mu_) { svc_->mu_.AssertHeld(); }

  void SendLocked(Response::ServingStatus s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(svc_->mu_) {
    if (finishing_) return;
    if (writing_) {
      pending_ = s;
      has_pending_ = true;
      return;
    }
    writing_ = true;
    out_.set_status(s);
    StartWrite(&out_);
  }

  // Finishes now, or once the write in flight is done.
  void FinishLocked(grpc::Status s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(svc_->mu_) {
    if (finishing_) return;
    finishing_ = true;
    if (writing_) {
      final_ = std::move(s);
      return;
    }
    Finish(std::move(s));
    finished_ = true;
  }

  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(svc_->mu_) {
    absl::MutexLock lock(&svc_->mu_);
    writing_ = false;
    // A change that came during this write goes out before the stream ends:
    // the drain's NOT_SERVING, queued behind a SERVING, is the last word.
    if (ok && has_pending_) {
      has_pending_ = false;
      writing_ = true;
      out_.set_status(pending_);
      StartWrite(&out_);
      return;
    }
    if (finishing_) {
      if (!finished_) {
        Finish(final_);
        finished_ = true;
      }
      return;
    }
    if (!ok) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the health watch stream closed"));
      return;
    }
  }

  void OnCancel() override ABSL_LOCKS_EXCLUDED(svc_->mu_) {
    absl::MutexLock lock(&svc_->mu_);
    FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override ABSL_LOCKS_EXCLUDED(svc_->mu_) {
    {
      absl::MutexLock lock(&svc_->mu_);
      svc_->watchers_.erase(this);
    }
    delete this;
  }

 private:
  HealthService* const svc_;
  const bool whole_server_;
  Response out_ ABSL_GUARDED_BY(svc_->mu_);  // the message being written
  bool writing_ ABSL_GUARDED_BY(svc_->mu_) = false;
  bool has_pending_ ABSL_GUARDED_BY(svc_->mu_) = false;
  Response::ServingStatus pending_ ABSL_GUARDED_BY(svc_->mu_) = Response::UNKNOWN;
  bool finishing_ ABSL_GUARDED_BY(svc_->mu_) = false;
  bool finished_ ABSL_GUARDED_BY(svc_->mu_) = false;
  grpc::Status final_ ABSL_GUARDED_BY(svc_->mu_);
};

HealthService::Response::ServingStatus HealthService::StatusLocked() const {
  return serving_ && !shut_down_ ? Response::SERVING : Response::NOT_SERVING;
}

void HealthService::Set(bool serving) {
  absl::MutexLock lock(&mu_);
  if (shut_down_ || serving == serving_) return;
  serving_ = serving;
  for (Watcher* w : watchers_) {
    w->AssertLockHeld();
    if (w->whole_server()) w->SendLocked(StatusLocked());
  }
}

void HealthService::Shutdown() {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  shut_down_ = true;
  for (Watcher* w : watchers_) {
    w->AssertLockHeld();
    if (serving_ && w->whole_server()) w->SendLocked(Response::NOT_SERVING);
    w->FinishLocked(grpc::Status::OK);
  }
}

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* ctx, const HealthCheckRequest* req,
                                               Response* resp) {
  grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
  if (!req->service().empty()) {
    r->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service (ask for \"\", the whole server)"));
    return r;
  }
  {
    absl::MutexLock lock(&mu_);
    resp->set_status(StatusLocked());
  }
  r->Finish(grpc::Status::OK);
  return r;
}

grpc::ServerWriteReactor<HealthService::Response>* HealthService::Watch(grpc::CallbackServerContext*,
                                                         const HealthCheckRequest* req) {
  absl::MutexLock lock(&mu_);
  // An unknown service streams SERVICE_UNKNOWN, as the protocol says.
  auto* w = new Watcher(this, req->service().empty());
  w->AssertLockHeld();
  if (shut_down_) w->FinishLocked(grpc::Status::OK);
  return w;
}

}  // namespace specserve::rpc
