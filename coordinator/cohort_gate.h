// Whether the sessions on the target draft together under load, decided by
// measuring the two ways against each other instead of predicting them.
//
// In a batch the K policy asks a drafting round to promise kLoadMargin more
// than plain decoding, and a round that would draft alone among plain
// batch-mates kLonePremium more (coordinator/k_policy.h): its predictions
// miss what drafting costs a batch (late rounds, the draft's varying wait,
// the tails). The premiums are each session's own, so in a batch of plain
// sessions none can move first, and a batch that would gain by drafting
// together never does. Seen on the 2-core Zen 4 at 2 clients (the ~1B Q8_0
// target, docs/measurements.md "Under load with the Q8_0 target"): the
// policy predicted drafting 1.13-1.23x plain's rate, fixed K 1 measured
// 1.18x with a p99 inter-token latency of 89 against 85 ms, and adaptive K
// stayed plain (0.97-0.99x).
//
// The gate cuts the coordinator's time into epochs (--cohort-epoch-ms). In
// an epoch every session either keeps the premiums (arm kKept) or waives
// them (kWaived: a round the premiums held back drafts K = 1, reason
// "cohort", so the batch moves to drafting together). When an epoch
// ends, its tokens committed per second are credited to its arm at its
// occupancy (the mean number of this coordinator's requests on the target,
// rounded), and the next epoch takes the arm with the higher rate at the
// occupancy now, running the other one every few epochs (after 2, doubling
// to kExploreMax while it keeps losing) so that a change of load is seen.
// Where the waiver lost at a lower occupancy it is not run at all.
//
// The gate starts at an occupancy with its first contested epoch: one in
// which at least kContestedShare of the rounds with a K choice were held
// back by a premium or drafted under the waiver (a few such rounds among
// plain_rate ones would draft alone, late for their batch-mates' pass).
// Where the policy predicts that no K beats plain decoding (a saturated
// target), or with one request on the target (no premium applies), the
// gate changes nothing.
//
// Tokens per second at a given occupancy compares the arms under a closed
// loop (the clients keep it fixed) and an open one (a faster arm serves the
// same arrivals at a lower occupancy, each occupancy keeping its own rates).
// An arm's epochs include the cost of switching to it, which favours the
// arm in place. Thread-safe; times come from the caller (tests).
//
// Off by default: on the 2-core Zen 4 (docs/measurements.md "Drafting
// together, measured") the batch did draft together at 2 clients (1.36-1.55 tokens a
// pass), for 1.03-1.19x plain's throughput against 0.99-1.18x without the
// gate, within the host's noise, and a p99 inter-token latency 25-80 ms
// above plain's; under Poisson arrivals (1.2 requests/s, up to 8 at once)
// its waived epochs left backlogs: E2E p50 1.10x plain's (1.19-1.42x while
// the waiver drafted the best K instead of 1), where without it the rows
// were level (0.92-1.04x).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

namespace specserve {

class CohortGate {
 public:
  using Clock = std::chrono::steady_clock;
  enum Arm { kKept = 0, kWaived = 1 };
  static const char* ArmName(Arm arm);  // "kept", "waived"
  // An epoch the gate measured, as credited.
  struct Epoch {
    Arm arm;
    int occupancy;
    int64_t tokens;
    double seconds;
  };

  // epoch: the length of an epoch; zero or less turns the gate off (always kKept).
  explicit CohortGate(Clock::duration epoch = std::chrono::milliseconds(0)) : epoch_(epoch) {}
  void SetEpoch(Clock::duration epoch) {
    std::lock_guard<std::mutex> lock(mu_);
    epoch_ = epoch;
  }
  // Called with each credited epoch, under the gate's lock (the
  // coordinator's metrics: specserve_cohort_epochs_total and friends).
  void OnEpoch(std::function<void(const Epoch&)> f) {
    std::lock_guard<std::mutex> lock(mu_);
    on_epoch_ = std::move(f);
  }
  bool on() const {
    std::lock_guard<std::mutex> lock(mu_);
    return epoch_.count() > 0;
  }

  // Whether rounds starting at `now` waive the premiums.
  bool Waived(Clock::time_point now);
  // A round that ended at `now` committed `tokens`; `chose`: the K policy
  // chose its K (a round with a drafter); `contested`: that choice was held
  // back by a premium or made under the waiver.
  void Round(int64_t tokens, bool chose, bool contested, Clock::time_point now);
  // This coordinator's requests on the target changed to `live`.
  void Live(int live, Clock::time_point now);

  // An arm's decayed mean rate (tokens a second) at an occupancy, 0 before
  // any measured epoch of it.
  double Rate(int occupancy, Arm arm) const;
  int64_t epochs(Arm arm) const {
    std::lock_guard<std::mutex> lock(mu_);
    return epochs_[arm];
  }

  static constexpr int kMinOccupancy = 2;  // a batch: the premiums apply from 1.5 sessions
  static constexpr int kExploreFirst = 2;  // epochs on the better arm before the other is run again
  static constexpr int kExploreMax = 16;
  static constexpr double kDecay = 0.7;  // an arm's rate weighs ~3 epochs
  static constexpr double kContestedShare = 0.25;

 private:
  struct Rates {
    double rate[2] = {0, 0}, weight[2] = {0, 0};
    int explore_every = kExploreFirst;  // epochs on the better arm between runs of the other
    int since_explore = 0;
  };
  // Ends the epoch when it is over (locked).
  void Roll(Clock::time_point now);
  Arm Next(int occupancy);

  mutable std::mutex mu_;
  Clock::duration epoch_;
  std::map<int, Rates> by_occupancy_;
  Arm arm_ = kKept;
  bool exploring_ = false;  // this epoch runs the arm that was losing
  bool started_ = false;
  Clock::time_point start_, live_since_;
  int64_t tokens_ = 0, chosen_ = 0, contested_ = 0;
  double live_seconds_ = 0;  // the integral of live over the epoch
  int live_ = 0;
  int64_t epochs_[2] = {0, 0};  // epochs measured, by arm
  std::function<void(const Epoch&)> on_epoch_;
};

}  // namespace specserve
