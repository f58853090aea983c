// The draft's sampling step on the device (Backend::ForwardSample,
// spec/forward_sample.h): for each sequence of a batch, the draft
// distribution q of its logits row (DraftDistribution: argmax; the top-N
// rank keys by radix select, sorted; weights, top-p and normalisation in
// rank order) and the token drawn from it (SampleSparse with the Philox draw
// UniformFloat(seed, position, kDraftSample)). It gives exactly the host's
// tokens and q: the recipe of spec/sampling.h step for step, with the device
// helpers the verify kernel uses (kernels/cuda_sampling_device.cuh: the same
// rank keys, glibc's expf bit for bit, double sums in the recipe's order).
//
// One block per sequence. Only the tokens, the entry counts and the top-N
// entries come back: (2 + 2 N) * 4 bytes per sequence, N the batch's largest
// top_n (<= kMaxDraftSampleTopN), whatever the vocabulary.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/cuda_util.h"
#include "spec/forward_sample.h"

namespace specserve::cuda {

struct DraftSampleBatchArgs {
  const float* logits = nullptr;          // [logits_rows, vocab] device
  int64_t logits_rows = 0;
  const int64_t* logits_row = nullptr;    // [batch] sequence b's row (clamped to [0, logits_rows))
  int32_t batch = 0;
  int32_t vocab = 0;
  int32_t max_n = 0;                      // entries per sequence in ids / probs: 1..kMaxDraftSampleTopN
  const DraftSampleInput* rules = nullptr;  // [batch] device
  int32_t* token = nullptr;               // [batch] out: the drawn token (-1: q empty, never for a finite row)
  int32_t* count = nullptr;               // [batch] out: entries of q
  int32_t* ids = nullptr;                 // [batch, max_n] out: q's ids, descending probability
  float* probs = nullptr;                 // [batch, max_n] out
};

// INVALID_ARGUMENT for bad sizes or null pointers; rules are trusted to
// satisfy ValidateDraftSampleInput (the kernel clamps top_n to [1, max_n]).
absl::Status LaunchDraftSample(const DraftSampleBatchArgs& a, cudaStream_t stream);

// What one sampling launch cost: the kernel's device time (CUDA events) and
// the bytes copied back.
struct DeviceSampleStats {
  double kernel_seconds = 0;
  int64_t bytes_to_host = 0;
};

// Host-side driver: validates the rules as the host path does, uploads them
// with the row offsets, runs the kernel on `stream` and copies back the
// tokens and entries. Keeps its device buffers between calls (not
// thread-safe).
class DeviceDraftSampler {
 public:
  DeviceDraftSampler() = default;
  ~DeviceDraftSampler();
  DeviceDraftSampler(const DeviceDraftSampler&) = delete;
  DeviceDraftSampler& operator=(const DeviceDraftSampler&) = delete;

  // Host logits [rules.size(), vocab]: row b is sequence b's (uploaded first).
  absl::StatusOr<std::vector<DraftSample>> Run(absl::Span<const DraftSampleInput> rules, const float* logits,
                                               int32_t vocab, cudaStream_t stream, DeviceSampleStats* stats = nullptr);
  // Logits already on the device: sequence b's row is logits_row[b] of
  // `logits` ([rows, vocab]). INVALID_ARGUMENT when a row leaves [0, rows).
  absl::StatusOr<std::vector<DraftSample>> RunOnDevice(absl::Span<const DraftSampleInput> rules, const float* logits,
                                                       absl::Span<const int64_t> logits_row, int64_t rows,
                                                       int32_t vocab, cudaStream_t stream,
                                                       DeviceSampleStats* stats = nullptr);

 private:
  DeviceBuffer logits_, meta_;
  std::vector<char> host_meta_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace specserve::cuda
