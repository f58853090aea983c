// The draft's sampling step (Backend::ForwardSample, common/backend.h): what
// one draft step samples, and the pieces every backend shares: the request's
// checks, made before any pass so a refused request changes nothing, and the
// host implementation (Forward to host logits, then DraftDistribution +
// SampleSparse per sequence, exactly what DraftSession::FinishStep does) that
// the CPU backend uses and the CUDA sampler is tested against.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/backend.h"
#include "spec/sampling.h"

namespace specserve {

// The largest top_n a draft step takes (the DraftRule's range, spec/round.h).
inline constexpr int32_t kMaxDraftSampleTopN = 64;

// One draft step's rule: q = DraftDistribution(row, vocab, temperature,
// top_n, top_p), then d = SampleSparse(q, UniformFloat(seed, position,
// kDraftSample)). A plain struct: the CUDA sampler uploads it as is.
struct DraftSampleInput {
  float temperature = 0.0f;              // >= 0; 0: greedy (one-hot q at the argmax)
  int32_t top_n = kDefaultDraftTopN;     // 1..kMaxDraftSampleTopN
  float top_p = 1.0f;                    // (0, 1]
  uint64_t seed = 0;                     // the request's seed (SessionSpec::target.seed)
  uint64_t position = 0;                 // absolute position of the drafted token
};

// What a draft step gives back: the token and exactly the q it was drawn
// from (entries in descending order, at most top_n).
struct DraftSample {
  TokenId token = -1;
  SparseDist dist;
};

// INVALID_ARGUMENT naming the field when a rule is out of range.
absl::Status ValidateDraftSampleInput(const DraftSampleInput& in);

// The step on one host row [vocab]: DraftDistribution then SampleSparse.
DraftSample SampleDraftStep(const float* logits, int32_t vocab, const DraftSampleInput& in);

// INVALID_ARGUMENT unless sample.size() == batch.size(), every rule is valid
// and batch[i].n_logits == 1 wherever sample[i] != nullptr.
absl::Status ValidateForwardSample(absl::Span<const ForwardSeq> batch, absl::Span<const DraftSampleInput* const> sample);

// Forward into out->logits (every sequence's rows: first_row counts them
// all), then SampleDraftStep on the row of each sequence with a rule.
// out->sample_seconds is the sampling's wall time; bytes_to_host is 0.
absl::Status ForwardSampleOnHost(Backend& backend, absl::Span<const ForwardSeq> batch,
                                 absl::Span<const DraftSampleInput* const> sample, SampleBatchOutput* out);

}  // namespace specserve
