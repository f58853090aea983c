#include "coordinator/cohort_gate.h"

#include <algorithm>
#include <cmath>

namespace specserve {
namespace {
double Seconds(CohortGate::Clock::duration d) { return std::chrono::duration<double>(d).count(); }
CohortGate::Arm Other(CohortGate::Arm a) { return a == CohortGate::kKept ? CohortGate::kWaived : CohortGate::kKept; }
}  // namespace

bool CohortGate::Waived(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  Roll(now);
  return epoch_.count() > 0 && arm_ == kWaived;
}

void CohortGate::Round(int64_t tokens, bool chose, bool contested, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  Roll(now);
  tokens_ += tokens;
  if (chose) ++chosen_;
  if (chose && contested) ++contested_;
}

void CohortGate::Live(int live, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  Roll(now);
  if (started_) live_seconds_ += live_ * Seconds(now - live_since_);
  live_since_ = now;
  live_ = live;
}

const char* CohortGate::ArmName(Arm arm) { return arm == kWaived ? "waived" : "kept"; }

double CohortGate::Rate(int occupancy, Arm arm) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_occupancy_.find(occupancy);
  return it == by_occupancy_.end() ? 0 : it->second.rate[arm];
}

void CohortGate::Roll(Clock::time_point now) {
  if (epoch_.count() <= 0) return;
  if (!started_) {
    started_ = true;
    start_ = live_since_ = now;
    return;
  }
  const Clock::duration length = now - start_;
  if (length < epoch_) return;
  live_seconds_ += live_ * Seconds(now - live_since_);
  live_since_ = now;
  const double seconds = Seconds(length);
  const int occupancy = static_cast<int>(std::lround(live_seconds_ / seconds));
  // The gate runs at an occupancy from its first contested epoch there,
  // and from then on measures every epoch there with K choices in it: once
  // the waiver has moved a batch to drafting, its policies choose drafting
  // themselves (no mate is plain, no late premium), and those epochs are
  // the waiver's too. An epoch that ran long had an idle spell in it
  // (nobody called): its rate says nothing about either arm.
  const bool contested = contested_ > 0 && contested_ >= kContestedShare * chosen_;
  const bool running = by_occupancy_.count(occupancy) > 0;
  const bool measured =
      occupancy >= kMinOccupancy && length <= 3 * epoch_ && chosen_ > 0 && (contested || running);
  if (measured) {
    Rates& r = by_occupancy_[occupancy];
    const double w = r.weight[arm_] * kDecay;
    r.rate[arm_] = (r.rate[arm_] * w + tokens_ / seconds) / (w + 1);
    r.weight[arm_] = w + 1;
    ++epochs_[arm_];
    if (on_epoch_) on_epoch_(Epoch{arm_, occupancy, tokens_, seconds});
    if (exploring_ && r.weight[Other(arm_)] > 0) {
      // The arm that was losing lost again: run it less often; it won: it is
      // the better one now, and the other is run again soon.
      const bool lost = r.rate[arm_] <= r.rate[Other(arm_)];
      r.explore_every = lost ? std::min(2 * r.explore_every, kExploreMax) : kExploreFirst;
    }
    arm_ = Next(occupancy);
  } else {
    arm_ = kKept;
    exploring_ = false;
  }
  start_ = now;
  tokens_ = chosen_ = contested_ = 0;
  live_seconds_ = 0;
}

CohortGate::Arm CohortGate::Next(int occupancy) {
  exploring_ = false;
  if (occupancy < kMinOccupancy) return kKept;
  // More requests, less for drafting to gain: where the waiver lost at a
  // lower occupancy it is not run at this one (seen under Poisson arrivals,
  // whose occupancy wanders over 1-8: trying the waiver at each cost
  // throughput and the tails).
  for (const auto& [lower, rl] : by_occupancy_) {
    if (lower >= occupancy) break;
    if (rl.weight[kWaived] > 0 && rl.weight[kKept] > 0 && rl.rate[kWaived] <= rl.rate[kKept]) return kKept;
  }
  Rates& r = by_occupancy_[occupancy];
  // An occupancy not measured yet: the waiver first (the arm in place has
  // run, at some occupancy, the epoch before).
  if (r.weight[kWaived] == 0) return kWaived;
  if (r.weight[kKept] == 0) return kKept;
  const Arm best = r.rate[kWaived] > r.rate[kKept] ? kWaived : kKept;
  if (++r.since_explore >= r.explore_every) {
    r.since_explore = 0;
    exploring_ = true;
    return Other(best);
  }
  return best;
}

}  // namespace specserve
