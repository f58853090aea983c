// In-process Drafter and Verifier: the draft and target sessions driven
// directly against a Backend (what `specserve generate --draft` runs, and the
// reference the gRPC path must reproduce token for token).
#pragma once

#include <memory>
#include <vector>

#include "common/backend.h"
#include "coordinator/roles.h"
#include "coordinator/round_loop.h"
#include "spec/draft_session.h"
#include "spec/target_session.h"
#include "specserve/v1/generation.pb.h"

namespace specserve {

class LocalDrafter final : public Drafter {
 public:
  explicit LocalDrafter(Backend& backend) : backend_(backend), session_(backend.kv_pool(), backend.config()) {}
  absl::Status Open(const SessionSpec& spec) override;
  absl::Status Commit(const Verdict& v) override { return session_.Commit(v); }
  absl::StatusOr<Proposal> Propose(int64_t round, int32_t k) override;
  void Close() override { session_.Close(); }
  absl::string_view name() const override { return kModelDrafterName; }
  void PrepareAhead(int32_t k) override;
  const DraftSession& session() const { return session_; }

 private:
  Backend& backend_;
  DraftSession session_;
  absl::Status Step(const ForwardSeq& pass);
  std::vector<float> logits_;   // the prefill's rows (none); a host-sampled step's row
  SampleBatchOutput sampled_;   // a step's token and q
};

class LocalVerifier final : public Verifier {
 public:
  explicit LocalVerifier(Backend& backend) : backend_(backend), session_(backend.kv_pool(), backend.config()) {}
  absl::Status Open(const SessionSpec& spec) override;
  absl::StatusOr<RoundResult> Verify(int64_t round, const Proposal& p) override;
  void Close() override { session_.Close(); }
  const TargetSession& session() const { return session_; }

 private:
  Backend& backend_;
  TargetSession session_;
  std::vector<float> logits_;
};

// One request, in process: verifies on `target`, drafts on `draft` (needed
// by a drafter that runs on the draft model, DrafterCaps::remote). `kind` is
// the API's choice, mapped onto the registry here (coordinator/drafters.h).
// A drafter that fails falls back to the n-gram one.
absl::StatusOr<LoopStats> GenerateInProcess(Backend& target, Backend* draft, v1::Drafter kind,
                                            const SessionSpec& spec, LoopOptions& opts);

}  // namespace specserve
