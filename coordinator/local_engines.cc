#include "coordinator/local_engines.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/drafters.h"

namespace specserve {
namespace {

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Opens a draft or target session and runs its prompt's prefill.
template <class Session>
absl::Status OpenWithPrefill(Session& session, Backend& backend, const SessionSpec& spec, std::vector<float>* logits) {
  ForwardSeq prefill;
  RETURN_IF_ERROR(session.Open(spec, &prefill));
  if (prefill.tokens.empty()) return absl::OkStatus();
  absl::Status s = backend.Forward({prefill}, logits);
  if (!s.ok()) session.Close();
  return s;
}

}  // namespace

absl::Status LocalDrafter::Open(const SessionSpec& spec) {
  return OpenWithPrefill(session_, backend_, spec, &logits_);
}

// One draft step: the backend samples where it keeps the logits
// (Backend::ForwardSample), unless the session samples on the host (a
// constraint transforms the row first: DraftSession::sample_rule).
absl::Status LocalDrafter::Step(const ForwardSeq& pass) {
  if (const DraftSampleInput* rule = session_.sample_rule()) {
    RETURN_IF_ERROR(backend_.ForwardSample({pass}, {rule}, &sampled_));
    session_.FinishSampledStep(std::move(sampled_.samples[0]));
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(backend_.Forward({pass}, &logits_));
  session_.FinishStep(logits_.data() + (logits_.size() - backend_.config().vocab));
  return absl::OkStatus();
}

absl::StatusOr<Proposal> LocalDrafter::Propose(int64_t round, int32_t k) {
  const auto t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(session_.BeginPropose(round, k));
  ForwardSeq pass;
  while (session_.NextStep(&pass)) {
    absl::Status s = Step(pass);
    if (!s.ok()) {
      session_.AbortPropose();
      return s;
    }
  }
  Proposal p = session_.TakeProposal();
  p.compute_seconds = Since(t0);
  return p;
}

void LocalDrafter::PrepareAhead(int32_t k) {
  session_.BeginAhead(k);
  ForwardSeq pass;
  while (session_.NextStep(&pass)) {
    // A failed pass only loses the guess; the next Propose redoes the work.
    if (!Step(pass).ok()) {
      session_.BeginAhead(0);
      return;
    }
  }
}

absl::Status LocalVerifier::Open(const SessionSpec& spec) {
  return OpenWithPrefill(session_, backend_, spec, &logits_);
}

absl::StatusOr<RoundResult> LocalVerifier::Verify(int64_t round, const Proposal& p) {
  const auto t0 = std::chrono::steady_clock::now();
  ForwardSeq pass;
  RETURN_IF_ERROR(session_.BeginVerify(round, p, &pass));
  // The backend verifies where it keeps the logits (Backend::ForwardVerify).
  const VerifyInput* block = session_.verify_block();
  VerifyBatchOutput out;
  absl::Status s = backend_.ForwardVerify({pass}, {block}, &out);
  if (!s.ok()) {
    session_.AbortVerify();
    return s;
  }
  ASSIGN_OR_RETURN(RoundResult r, block != nullptr ? session_.FinishVerify(out.results[0])
                                                   : session_.FinishVerify(out.logits.data()));
  r.compute_seconds = Since(t0);
  return r;
}

absl::StatusOr<LoopStats> GenerateInProcess(Backend& target, Backend* draft, v1::Drafter kind,
                                            const SessionSpec& spec, LoopOptions& opts) {
  const DrafterEntry* asked = DrafterFor(kind);
  if (asked != nullptr && asked->caps.remote && draft == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("drafter '", asked->name, "' needs a draft model"));
  }
  LocalVerifier verifier(target);
  DrafterEnv env;
  if (draft != nullptr) env.draft_model = [draft] { return std::make_unique<LocalDrafter>(*draft); };
  MadeDrafter made = MakeDrafter(asked, env);
  if (!opts.make_fallback) {
    opts.make_fallback = [](const absl::Status&, bool) { return MakeFallbackDrafter(); };
  }
  return RunSpeculative(spec, made.drafter.get(), verifier, opts);
}

}  // namespace specserve
