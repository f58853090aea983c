#include "coordinator/local_engines.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/ngram_drafter.h"

namespace specserve {
namespace {

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

absl::Status LocalDrafter::Open(const SessionSpec& spec) {
  ForwardSeq prefill;
  RETURN_IF_ERROR(session_.Open(spec, &prefill));
  if (prefill.tokens.empty()) return absl::OkStatus();
  absl::Status s = backend_.Forward({prefill}, &logits_);
  if (!s.ok()) session_.Close();
  return s;
}

absl::StatusOr<Proposal> LocalDrafter::Propose(int64_t round, const std::optional<RoundResult>& last, int32_t k) {
  const auto t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(session_.BeginPropose(round, last, k));
  ForwardSeq pass;
  while (session_.NextStep(&pass)) {
    absl::Status s = backend_.Forward({pass}, &logits_);
    if (!s.ok()) {
      session_.AbortPropose();
      return s;
    }
    session_.FinishStep(logits_.data());
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
    if (!backend_.Forward({pass}, &logits_).ok()) {
      session_.BeginAhead(0);
      return;
    }
    session_.FinishStep(logits_.data());
  }
}

absl::Status LocalVerifier::Open(const SessionSpec& spec) {
  ForwardSeq prefill;
  RETURN_IF_ERROR(session_.Open(spec, &prefill));
  if (prefill.tokens.empty()) return absl::OkStatus();
  absl::Status s = backend_.Forward({prefill}, &logits_);
  if (!s.ok()) session_.Close();
  return s;
}

absl::StatusOr<RoundResult> LocalVerifier::Verify(int64_t round, const Proposal& p) {
  const auto t0 = std::chrono::steady_clock::now();
  ForwardSeq pass;
  RETURN_IF_ERROR(session_.BeginVerify(round, p, &pass));
  absl::Status s = backend_.Forward({pass}, &logits_);
  if (!s.ok()) {
    session_.AbortVerify();
    return s;
  }
  ASSIGN_OR_RETURN(RoundResult r, session_.FinishVerify(logits_.data()));
  r.compute_seconds = Since(t0);
  return r;
}

absl::StatusOr<DrafterKind> ParseDrafterKind(const std::string& s) {
  if (s == "model") return DrafterKind::kModel;
  if (s == "ngram") return DrafterKind::kNgram;
  if (s == "none") return DrafterKind::kNone;
  return absl::InvalidArgumentError(absl::StrCat("unknown drafter '", s, "' (model, ngram or none)"));
}

absl::StatusOr<LoopStats> GenerateInProcess(Backend& target, Backend* draft, DrafterKind kind,
                                            const SessionSpec& spec, LoopOptions& opts) {
  LocalVerifier verifier(target);
  std::unique_ptr<Drafter> drafter;
  if (kind == DrafterKind::kModel) {
    if (draft == nullptr) return absl::InvalidArgumentError("drafter 'model' needs a draft model");
    drafter = std::make_unique<LocalDrafter>(*draft);
  } else if (kind == DrafterKind::kNgram) {
    drafter = std::make_unique<NgramDrafter>();
  }
  if (!opts.make_fallback) opts.make_fallback = [] { return std::make_unique<NgramDrafter>(); };
  return RunSpeculative(spec, drafter.get(), verifier, opts);
}

}  // namespace specserve
