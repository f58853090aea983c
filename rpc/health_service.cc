#include "rpc/health_service.h"

namespace specserve::rpc {

using grpc::health::v1::HealthCheckRequest;

// One Watch stream: writes the status now and after every change (only the
// latest when changes come faster than writes); finishes on cancel, on a
// failed write, or at Shutdown. All its state is guarded by the service's mu_.
class HealthService::Watcher final : public grpc::ServerWriteReactor<Response> {
 public:
  // Registers itself; the caller holds mu_.
  // `whole_server`: it asked for ""; otherwise SERVICE_UNKNOWN, for good.
  Watcher(HealthService* svc, bool whole_server) : svc_(svc), whole_server_(whole_server) {
    svc_->watchers_.insert(this);
    SendLocked(whole_server ? svc_->StatusLocked() : Response::SERVICE_UNKNOWN);
  }

  bool whole_server() const { return whole_server_; }

  // Caller holds mu_.
  void SendLocked(Response::ServingStatus s) {
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

  // Caller holds mu_. Finishes now, or once the write in flight is done.
  void FinishLocked(grpc::Status s) {
    if (finishing_) return;
    finishing_ = true;
    if (writing_) {
      final_ = std::move(s);
      return;
    }
    Finish(std::move(s));
    finished_ = true;
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(svc_->mu_);
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

  void OnCancel() override {
    std::lock_guard<std::mutex> lock(svc_->mu_);
    FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    {
      std::lock_guard<std::mutex> lock(svc_->mu_);
      svc_->watchers_.erase(this);
    }
    delete this;
  }

 private:
  HealthService* svc_;
  const bool whole_server_;
  Response out_;  // the message being written
  bool writing_ = false;
  bool has_pending_ = false;
  Response::ServingStatus pending_ = Response::UNKNOWN;
  bool finishing_ = false;
  bool finished_ = false;
  grpc::Status final_;
};

HealthService::Response::ServingStatus HealthService::StatusLocked() const {
  return serving_ && !shut_down_ ? Response::SERVING : Response::NOT_SERVING;
}

void HealthService::Set(bool serving) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_ || serving == serving_) return;
  serving_ = serving;
  for (Watcher* w : watchers_) {
    if (w->whole_server()) w->SendLocked(StatusLocked());
  }
}

void HealthService::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) return;
  shut_down_ = true;
  for (Watcher* w : watchers_) {
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
    std::lock_guard<std::mutex> lock(mu_);
    resp->set_status(StatusLocked());
  }
  r->Finish(grpc::Status::OK);
  return r;
}

grpc::ServerWriteReactor<HealthService::Response>* HealthService::Watch(grpc::CallbackServerContext*,
                                                         const HealthCheckRequest* req) {
  std::lock_guard<std::mutex> lock(mu_);
  // An unknown service streams SERVICE_UNKNOWN, as the protocol says.
  auto* w = new Watcher(this, req->service().empty());
  if (shut_down_) w->FinishLocked(grpc::Status::OK);
  return w;
}

}  // namespace specserve::rpc
