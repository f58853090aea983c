// Unit tests for the cohort gate (coordinator/cohort_gate.h): epochs that
// keep or waive the K policy's premiums, each arm's tokens per second
// measured at an occupancy, the better arm chosen and the other run now and
// then. Time is simulated: rounds every 100 ms, epochs of 1 s.
#include "coordinator/cohort_gate.h"

#include <chrono>
#include <cstdint>

#include "gtest/gtest.h"

namespace specserve {
namespace {

using Clock = CohortGate::Clock;
using std::chrono::milliseconds;

// Runs `steps` rounds of 100 ms: each asks the gate for its arm and commits
// `kept` or `waived` tokens accordingly; one round in `contested_every` is
// contested (0: none). Returns the rounds that ran waived.
struct Sim {
  CohortGate gate{milliseconds(1000)};
  Clock::time_point t = Clock::time_point() + std::chrono::hours(1);
  int64_t Run(int steps, int64_t kept, int64_t waived, int contested_every = 1) {
    int64_t on = 0;
    for (int i = 0; i < steps; ++i) {
      const bool w = gate.Waived(t);
      on += w ? 1 : 0;
      const bool contested = contested_every > 0 && i % contested_every == 0;
      gate.Round(w ? waived : kept, /*chose=*/true, contested, t);
      t += milliseconds(100);
    }
    return on;
  }
  void Live(int n) { gate.Live(n, t); }
};

TEST(CohortGate, OffNeverWaives) {
  CohortGate gate;  // epoch 0
  EXPECT_FALSE(gate.on());
  const Clock::time_point t0 = Clock::now();
  gate.Live(4, t0);
  for (int i = 0; i < 100; ++i) {
    gate.Round(1, true, true, t0 + milliseconds(100 * i));
    EXPECT_FALSE(gate.Waived(t0 + milliseconds(100 * i)));
  }
}

TEST(CohortGate, OneRequestAloneIsNeverABatch) {
  Sim s;
  s.Live(1);
  EXPECT_EQ(s.Run(300, 3, 6), 0);
  EXPECT_EQ(s.gate.epochs(CohortGate::kWaived), 0);
}

TEST(CohortGate, NothingContestedNothingTried) {
  // The policy predicts no K beats plain decoding: no round is held back by
  // a premium, and the gate never waives them.
  Sim s;
  s.Live(4);
  EXPECT_EQ(s.Run(300, 3, 6, /*contested_every=*/0), 0);
}

TEST(CohortGate, AFewContestedRoundsAmongUncontestedOnesAreNotABatchToMove) {
  // 1 round in 5 held back by a premium, the rest plain_rate: below
  // kContestedShare, so nothing is tried; 1 in 3 is enough.
  Sim s;
  s.Live(8);
  EXPECT_EQ(s.Run(300, 3, 6, /*contested_every=*/5), 0);
  EXPECT_GT(s.Run(300, 3, 6, /*contested_every=*/3), 0);
}

TEST(CohortGate, SettlesOnDraftingTogetherWhenItCommitsMore) {
  Sim s;
  s.Live(2);
  s.Run(100, 30, 36);  // 10 epochs: both arms measured
  EXPECT_NEAR(s.gate.Rate(2, CohortGate::kKept), 300, 1e-6);
  EXPECT_NEAR(s.gate.Rate(2, CohortGate::kWaived), 360, 1e-6);
  // From then on the waiver, with the other arm run every 2, 4, 8, then 16
  // epochs: 100 epochs waive at least 85 of them.
  const int64_t waived = s.Run(1000, 30, 36);
  EXPECT_GE(waived, 850);
  EXPECT_LT(waived, 1000);  // the kept arm is still run now and then
}

TEST(CohortGate, KeepsThePremiumsWhenDraftingTogetherCommitsLess) {
  Sim s;
  s.Live(3);
  s.Run(100, 30, 24);
  const int64_t waived = s.Run(1000, 30, 24);
  EXPECT_LE(waived, 150);
  EXPECT_GT(waived, 0);
}

TEST(CohortGate, FollowsAChangeOfWhichArmIsFaster) {
  Sim s;
  s.Live(2);
  s.Run(600, 30, 24);  // settled on keeping the premiums, exploring every 16 epochs
  // Drafting together is now faster: within a few of its explorations the
  // gate has moved to it.
  s.Run(400, 30, 45);
  EXPECT_GE(s.Run(200, 30, 45), 160);
}

TEST(CohortGate, EachOccupancyKeepsItsOwnRates) {
  Sim s;
  s.Live(2);
  s.Run(300, 30, 36);  // at 2 requests drafting together pays
  s.Live(4);
  s.Run(300, 50, 40);  // at 4 it does not
  EXPECT_GT(s.gate.Rate(2, CohortGate::kWaived), s.gate.Rate(2, CohortGate::kKept));
  EXPECT_LT(s.gate.Rate(4, CohortGate::kWaived), s.gate.Rate(4, CohortGate::kKept));
  EXPECT_LE(s.Run(300, 50, 40), 60);
  s.Live(2);
  s.Run(20, 30, 36);
  EXPECT_GE(s.Run(300, 30, 36), 240);
}

TEST(CohortGate, WhereTheWaiverLostAtFewerRequestsItIsNotTriedAtMore) {
  Sim s;
  s.Live(2);
  s.Run(300, 30, 24);  // at 2 requests drafting together loses
  const int64_t before = s.gate.epochs(CohortGate::kWaived);
  s.Live(5);
  EXPECT_EQ(s.Run(300, 50, 70), 0);  // so at 5 it is not run, whatever it would give
  EXPECT_EQ(s.gate.epochs(CohortGate::kWaived), before);
  EXPECT_GT(s.gate.Rate(5, CohortGate::kKept), 0);
}

TEST(CohortGate, AnIdleSpellCreditsNoArm) {
  Sim s;
  s.Live(2);
  s.Run(5, 30, 36);
  s.t += std::chrono::seconds(30);  // nobody asked for 30 s: that epoch is not a measurement
  s.Run(1, 30, 36);
  EXPECT_EQ(s.gate.epochs(CohortGate::kKept) + s.gate.epochs(CohortGate::kWaived), 0);
}

TEST(CohortGate, OccupancyIsTheTimeWeightedMeanOfLiveRequests) {
  // Half of each epoch with 1 request, half with 3: occupancy 2, a batch.
  Sim s;
  for (int e = 0; e < 20; ++e) {
    s.Live(1);
    s.Run(5, 30, 36);
    s.Live(3);
    s.Run(5, 30, 36);
  }
  EXPECT_GT(s.gate.Rate(2, CohortGate::kWaived), 0);
  EXPECT_EQ(s.gate.Rate(1, CohortGate::kWaived), 0);
  EXPECT_EQ(s.gate.Rate(3, CohortGate::kWaived), 0);
}

}  // namespace
}  // namespace specserve
