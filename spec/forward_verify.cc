#include "spec/forward_verify.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace specserve {

absl::Status ValidateForwardVerify(absl::Span<const ForwardSeq> batch, absl::Span<const VerifyInput* const> verify,
                                   const ModelConfig& config) {
  if (verify.size() != batch.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("forward-verify: ", verify.size(), " verify blocks for ", batch.size(), " sequences"));
  }
  static const float kSomeLogits = 0.0f;  // ValidateVerifyInput wants rows; the backend supplies them
  for (size_t i = 0; i < batch.size(); ++i) {
    const VerifyInput* v = verify[i];
    if (v == nullptr) continue;
    VerifyInput check = *v;
    check.target_logits = &kSomeLogits;
    if (check.vocab != config.vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("forward-verify: sequence ", i, " has vocab ", check.vocab, ", the model ", config.vocab));
    }
    if (absl::Status s = ValidateVerifyInput(check); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("forward-verify: sequence ", i, ": ", s.message()));
    }
    if (batch[i].n_logits != v->k + 1) {
      return absl::InvalidArgumentError(absl::StrCat("forward-verify: sequence ", i, " has ", batch[i].n_logits,
                                                     " logits rows for a block of k = ", v->k));
    }
  }
  return absl::OkStatus();
}

absl::Status ForwardVerifyOnHost(Backend& backend, absl::Span<const ForwardSeq> batch,
                                 absl::Span<const VerifyInput* const> verify, VerifyBatchOutput* out) {
  const ModelConfig& c = backend.config();
  RETURN_IF_ERROR(ValidateForwardVerify(batch, verify, c));
  RETURN_IF_ERROR(backend.Forward(batch, &out->logits));
  const auto t0 = std::chrono::steady_clock::now();
  out->results.assign(batch.size(), VerifyResult{});
  out->first_row.resize(batch.size());
  out->bytes_to_host = 0;
  int64_t row = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    out->first_row[i] = row;
    if (verify[i] != nullptr) {
      VerifyInput in = *verify[i];
      in.target_logits = out->logits.data() + row * c.vocab;
      // Validated above, so Verify cannot refuse; a failure here is a bug.
      ASSIGN_OR_RETURN(out->results[i], Verify(in));
    }
    row += batch[i].n_logits;
  }
  out->verify_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return absl::OkStatus();
}

}  // namespace specserve
