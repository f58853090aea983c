// Decorators that time every Propose / Verify call and feed the
// coordinator's per-round metrics, for any Drafter / Verifier (remote,
// n-gram, local). They share one RoundMeter per request: the drafter notes
// what it proposed and how long it took, the verifier closes the round.
//
// Phases of a round (specserve_round_duration_seconds{phase}): "draft" and
// "verify" are the time the services report for the call (queueing and
// compute), "network" is the rest of the two calls' wall time (transport,
// serialisation, the coordinator's own overhead). An in-process drafter has
// no network leg.
#pragma once

#include <memory>
#include <string>

#include "coordinator/coordinator_metrics.h"
#include "coordinator/roles.h"

namespace specserve {

struct RoundMeter {
  CoordinatorMetrics* metrics = nullptr;  // null: nothing is exported
  // Set by the drafter for the round now being verified.
  std::string drafter = "none";
  double draft_seconds = 0;
  double draft_network_seconds = 0;
  bool drafted = false;
  // Why the last drafter failed ("open_error", "propose_error"): the fallback's label.
  std::string failure = "propose_error";
  // Sums over the request's verified rounds (GenerationStats).
  double total_draft_seconds = 0;
  double total_verify_seconds = 0;
  double total_network_seconds = 0;
};

class MeteredDrafter final : public Drafter {
 public:
  // `remote`: the drafter's calls cross the network (its compute_seconds is the service's time).
  MeteredDrafter(std::unique_ptr<Drafter> inner, RoundMeter* meter, bool remote)
      : inner_(std::move(inner)), meter_(meter), remote_(remote) {}
  absl::Status Open(const SessionSpec& spec) override;
  absl::StatusOr<Proposal> Propose(int64_t round, const std::optional<RoundResult>& last, int32_t k) override;
  void Close() override { inner_->Close(); }
  std::string kind() const override { return inner_->kind(); }
  void PrepareAhead(int32_t k) override { inner_->PrepareAhead(k); }

 private:
  std::unique_ptr<Drafter> inner_;
  RoundMeter* meter_;
  bool remote_;
};

class MeteredVerifier final : public Verifier {
 public:
  MeteredVerifier(Verifier* inner, RoundMeter* meter) : inner_(inner), meter_(meter) {}
  absl::Status Open(const SessionSpec& spec) override { return inner_->Open(spec); }
  absl::StatusOr<RoundResult> Verify(int64_t round, const Proposal& p) override;
  void Close() override { inner_->Close(); }

 private:
  Verifier* inner_;
  RoundMeter* meter_;
};

}  // namespace specserve
