#include "spec/forward_sample.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "spec/rng.h"

namespace specserve {

absl::Status ValidateDraftSampleInput(const DraftSampleInput& in) {
  if (!(in.temperature >= 0.0f)) {  // as ValidateSessionSpec: NaN and negative refused
    return absl::InvalidArgumentError(absl::StrCat("draft temperature must be >= 0, got ", in.temperature));
  }
  if (in.top_n < 1 || in.top_n > kMaxDraftSampleTopN) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft top_n ", in.top_n, " not in [1, ", kMaxDraftSampleTopN, "]"));
  }
  if (!(in.top_p > 0.0f && in.top_p <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("draft top_p must be in (0, 1], got ", in.top_p));
  }
  return absl::OkStatus();
}

DraftSample SampleDraftStep(const float* logits, int32_t vocab, const DraftSampleInput& in) {
  DraftSample out;
  out.dist = DraftDistribution(logits, vocab, in.temperature, in.top_n, in.top_p);
  out.token = SampleSparse(out.dist, UniformFloat(in.seed, in.position, RngPurpose::kDraftSample));
  return out;
}

absl::Status ValidateForwardSample(absl::Span<const ForwardSeq> batch, absl::Span<const DraftSampleInput* const> sample) {
  if (sample.size() != batch.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("forward-sample: ", sample.size(), " sampling rules for ", batch.size(), " sequences"));
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    if (sample[i] == nullptr) continue;
    if (absl::Status s = ValidateDraftSampleInput(*sample[i]); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("forward-sample: sequence ", i, ": ", s.message()));
    }
    if (batch[i].n_logits != 1) {
      return absl::InvalidArgumentError(absl::StrCat("forward-sample: sequence ", i, " has ", batch[i].n_logits,
                                                     " logits rows; a draft step samples from exactly 1"));
    }
  }
  return absl::OkStatus();
}

absl::Status ForwardSampleOnHost(Backend& backend, absl::Span<const ForwardSeq> batch,
                                 absl::Span<const DraftSampleInput* const> sample, SampleBatchOutput* out) {
  const ModelConfig& c = backend.config();
  RETURN_IF_ERROR(ValidateForwardSample(batch, sample));
  RETURN_IF_ERROR(backend.Forward(batch, &out->logits));
  const auto t0 = std::chrono::steady_clock::now();
  out->samples.assign(batch.size(), DraftSample{});
  out->first_row.resize(batch.size());
  out->bytes_to_host = 0;
  int64_t row = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    out->first_row[i] = row;
    if (sample[i] != nullptr) out->samples[i] = SampleDraftStep(out->logits.data() + row * c.vocab, c.vocab, *sample[i]);
    row += batch[i].n_logits;
  }
  out->sample_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return absl::OkStatus();
}

}  // namespace specserve
