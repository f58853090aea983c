#include "coordinator/request_queue.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace specserve {

RequestQueue::RequestQueue(Options opts)
    : opts_(std::move(opts)), line_(static_cast<size_t>(std::max(0, opts_.max_waiting))) {
  timer_ = std::thread([this] { TimerLoop(); });
}

RequestQueue::~RequestQueue() {
  StartDraining();
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  changed_.SignalAll();
  timer_.join();
}

uint64_t RequestQueue::Submit(int slots, Clock::time_point deadline, Decision decide) {
  Decided decided;
  uint64_t ticket = 0;
  {
    absl::MutexLock lock(&mu_);
    ticket = next_ticket_++;
    if (draining_) {
      decided.emplace_back(std::move(decide), absl::UnavailableError("coordinator is shutting down"));
    } else if (slots < 1 || slots > opts_.max_running) {
      decided.emplace_back(std::move(decide),
                           absl::ResourceExhaustedError(absl::StrCat(
                               "a request of ", slots, " sequences cannot run: at most ", opts_.max_running,
                               " run at once (--max-sessions)")));
    } else if (line_.empty() && running_ + slots <= opts_.max_running) {
      running_ += slots;
      decided.emplace_back(std::move(decide), absl::OkStatus());
    } else if (line_.full()) {
      decided.emplace_back(std::move(decide),
                           absl::ResourceExhaustedError(absl::StrCat(
                               "coordinator busy: ", running_, " sequences running (--max-sessions ",
                               opts_.max_running, ") and ", line_.size(), " requests waiting (--max-waiting)")));
    } else {
      // Leaves the line at the earlier of the caller's deadline and the
      // queue timeout; which one it was decides the status (TimerLoop).
      const Clock::time_point limit = Clock::now() + opts_.timeout;
      line_.Push(ticket, std::min(deadline, limit), Waiter{slots, deadline, std::move(decide)});
      WaitingChanged(+1);
      changed_.SignalAll();
    }
  }
  Run(decided);
  return ticket;
}

void RequestQueue::Cancel(uint64_t ticket) {
  Decided decided;
  {
    absl::MutexLock lock(&mu_);
    std::optional<Waiter> w = line_.Take(ticket);
    if (!w) return;
    WaitingChanged(-1);
    decided.emplace_back(std::move(w->decide), absl::CancelledError("the client left while waiting for a slot"));
    // The cancelled one may have held up smaller ones behind it.
    AdmitLocked(&decided);
    changed_.SignalAll();
  }
  Run(decided);
}

void RequestQueue::Release(int slots) {
  Decided decided;
  {
    absl::MutexLock lock(&mu_);
    running_ -= slots;
    AdmitLocked(&decided);
    changed_.SignalAll();
  }
  Run(decided);
}

void RequestQueue::StartDraining() {
  Decided decided;
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
    line_.TakeAll([&](Waiter&& w) {
      WaitingChanged(-1);
      decided.emplace_back(std::move(w.decide), absl::UnavailableError("coordinator is shutting down"));
    });
    changed_.SignalAll();
  }
  Run(decided);
}

int RequestQueue::running() const {
  absl::MutexLock lock(&mu_);
  return running_;
}

int RequestQueue::waiting() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(line_.size());
}

bool RequestQueue::draining() const {
  absl::MutexLock lock(&mu_);
  return draining_;
}

void RequestQueue::WaitIdle() {
  absl::MutexLock lock(&mu_);
  while (running_ != 0 || !line_.empty()) changed_.Wait(&mu_);
}

void RequestQueue::AdmitLocked(Decided* out) {
  while (Waiter* w = line_.Front()) {
    if (running_ + w->slots > opts_.max_running) break;  // the oldest does not fit yet: nobody overtakes it
    running_ += w->slots;
    Waiter started = line_.PopFront();
    WaitingChanged(-1);
    out->emplace_back(std::move(started.decide), absl::OkStatus());
  }
}

void RequestQueue::WaitingChanged(int delta) {
  if (opts_.on_waiting) opts_.on_waiting(delta);
}

void RequestQueue::TimerLoop() {
  mu_.Lock();
  while (!stop_) {
    const std::optional<Clock::time_point> next = line_.NextDeadline();
    if (next) {
      changed_.WaitWithTimeout(&mu_, absl::FromChrono(*next - Clock::now()));
    } else {
      changed_.Wait(&mu_);
    }
    Decided decided;
    const Clock::time_point now = Clock::now();
    line_.Expire(now, [&](Waiter&& w) {
      WaitingChanged(-1);
      absl::Status why =
          w.deadline <= now
              ? absl::DeadlineExceededError("the request's deadline passed while it waited for a slot")
              : absl::ResourceExhaustedError(absl::StrCat(
                    "no slot within ", opts_.timeout.count() / 1000.0, " s (--queue-timeout-s): ",
                    opts_.max_running, " sequences running (--max-sessions); retry later"));
      decided.emplace_back(std::move(w.decide), std::move(why));
    });
    if (decided.empty()) continue;
    // Expired waiters at the front may have held up ones that fit now.
    AdmitLocked(&decided);
    changed_.SignalAll();
    mu_.Unlock();
    Run(decided);
    mu_.Lock();
  }
  mu_.Unlock();
}

void RequestQueue::Run(Decided& decided) {
  for (auto& [decide, status] : decided) decide(std::move(status));
}

RequestQueue::Clock::time_point SteadyDeadline(std::chrono::system_clock::time_point deadline) {
  if (deadline == std::chrono::system_clock::time_point::max()) return RequestQueue::Clock::time_point::max();
  const auto left = deadline - std::chrono::system_clock::now();
  // Far-future deadlines (gRPC's "none" is sometimes just very far) stay "none".
  if (left > std::chrono::hours(24 * 365)) return RequestQueue::Clock::time_point::max();
  return RequestQueue::Clock::now() + std::chrono::duration_cast<RequestQueue::Clock::duration>(left);
}

}  // namespace specserve
