#include "coordinator/metered_engines.h"

#include <algorithm>
#include <chrono>

namespace specserve {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

absl::Status MeteredDrafter::Open(const SessionSpec& spec) {
  absl::Status s = inner_->Open(spec);
  if (!s.ok()) meter_->failure = "open_error";
  return s;
}

absl::StatusOr<Proposal> MeteredDrafter::Propose(int64_t round, const std::optional<RoundResult>& last, int32_t k) {
  const auto t0 = Clock::now();
  absl::StatusOr<Proposal> p = inner_->Propose(round, last, k);
  const double wall = Since(t0);
  if (!p.ok()) {
    meter_->failure = "propose_error";
    return p;
  }
  // Looked-up blocks get their own label: their acceptance is not the draft model's.
  meter_->drafter = p->looked_up ? "lookup" : inner_->kind();
  meter_->drafted = true;
  meter_->draft_seconds = remote_ ? std::min(wall, p->compute_seconds) : wall;
  meter_->draft_network_seconds = remote_ ? wall - meter_->draft_seconds : 0;
  return p;
}

absl::StatusOr<RoundResult> MeteredVerifier::Verify(int64_t round, const Proposal& p) {
  const auto t0 = Clock::now();
  absl::StatusOr<RoundResult> r = inner_->Verify(round, p);
  const double wall = Since(t0);
  if (r.ok()) {
    const double verify = std::min(wall, r->compute_seconds);
    const double network = meter_->draft_network_seconds + (wall - verify);
    meter_->total_draft_seconds += meter_->draft_seconds;
    meter_->total_verify_seconds += verify;
    meter_->total_network_seconds += network;
    if (meter_->metrics) {
      CoordinatorMetrics& m = *meter_->metrics;
      m.ObserveRound(meter_->drafter, static_cast<int>(p.tokens.size()), r->accepted);
      m.round_verify.Observe(verify);
      if (meter_->drafted) m.round_draft.Observe(meter_->draft_seconds);
      m.round_network.Observe(network);
    }
  }
  meter_->drafter = "none";
  meter_->drafted = false;
  meter_->draft_seconds = meter_->draft_network_seconds = 0;
  return r;
}

}  // namespace specserve
