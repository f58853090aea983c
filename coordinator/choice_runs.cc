#include "coordinator/choice_runs.h"

#include <future>

#include "absl/time/time.h"
#include "rpc/status_convert.h"

namespace specserve {

void ChoiceRuns::Shared::Push(ChoiceEvent ev) {
  absl::MutexLock lock(&mu);
  events.push_back(std::move(ev));
  cv.SignalAll();
}

absl::StatusOr<std::shared_ptr<ChoiceRuns>> ChoiceRuns::Start(GenerationService* svc,
                                                              std::vector<v1::GenerateRequest> requests,
                                                              ThreadRequestIds ids) {
  const auto arrived = std::chrono::steady_clock::now();
  const int n = static_cast<int>(requests.size());
  // The HTTP handler's thread waits here for the n slots (the queue's
  // timeout bounds the wait; an HTTP request carries no deadline).
  auto decided = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> admitted = decided->get_future();
  svc->Enqueue(n, std::chrono::system_clock::time_point::max(),
               [decided](absl::Status s) { decided->set_value(std::move(s)); });
  if (absl::Status s = admitted.get(); !s.ok()) {
    svc->CountRequest(rpc::ToGrpc(s));
    return s;
  }
  auto runs = std::shared_ptr<ChoiceRuns>(new ChoiceRuns());
  std::shared_ptr<Shared> shared = runs->shared_;
  runs->left_ = n;
  for (int i = 0; i < n; ++i) shared->cancels.push_back(std::make_shared<CancelGroup>());
  for (int i = 0; i < n; ++i) {
    svc->Spawn([svc, shared, i, req = std::move(requests[i]), arrived, ids] {
      RequestContext rc = svc->Context(shared->cancels[i].get(), std::chrono::system_clock::time_point::max(), arrived);
      rc.request_id = ids.request_id;
      rc.trace = ids.trace;
      rc.on_delta = [&shared, i](v1::Delta d) {
        ChoiceEvent ev;
        ev.index = i;
        ev.delta = std::move(d);
        shared->Push(std::move(ev));
        return !shared->cancels[i]->cancelled();
      };
      absl::StatusOr<v1::Final> final = RunGeneration(req, svc->options(), rc);
      svc->EndRequest(rpc::ToGrpc(final.status()));  // the slot is free before the client hears the end
      ChoiceEvent ev;
      ev.index = i;
      if (final.ok()) {
        ev.kind = ChoiceEvent::Kind::kFinal;
        ev.final = std::move(*final);
      } else {
        ev.kind = ChoiceEvent::Kind::kError;
        ev.error = final.status();
      }
      shared->Push(std::move(ev));
    });
  }
  return runs;
}

ChoiceRuns::Next ChoiceRuns::Wait(ChoiceEvent* ev, std::chrono::milliseconds timeout) {
  if (left_ == 0) return Next::kEnd;
  absl::MutexLock lock(&shared_->mu);
  const absl::Time deadline = absl::Now() + absl::FromChrono(timeout);
  while (shared_->events.empty()) {
    if (shared_->cv.WaitWithDeadline(&shared_->mu, deadline) && shared_->events.empty()) return Next::kTimeout;
  }
  *ev = std::move(shared_->events.front());
  shared_->events.pop_front();
  if (ev->kind != ChoiceEvent::Kind::kDelta) --left_;
  return Next::kEvent;
}

void ChoiceRuns::Cancel() {
  for (const auto& c : shared_->cancels) c->Cancel();
}

}  // namespace specserve
