// The verify-and-resample kernel: speculative sampling's accept / recover /
// bonus step (spec/verify.h) for a batch of sequences on the device, and
// with k = 0 plain sampling (SampleToken). It gives exactly the tokens of the
// CPU reference Verify on the same inputs: the same recipe (spec/sampling.h)
// step for step, glibc's expf bit for bit (kernels/glibc_expf.h), the same
// Philox draws (spec/rng.h), and the double sums in ascending token order
// that the recipe fixes.
//
// Two kernels:
//  1. one block per (sequence, row i <= k): the target distribution p_i of
//     the row (argmax; top-k by radix select over the rank keys; e_i; top-p
//     by walking the rank order in sorted chunks of 1024; normalisation) and
//     the row's sum of p for sampling. Rows are independent, so all K+1 of a
//     sequence run at once.
//  2. one block per sequence: the accept tests in order (one thread, as the
//     CPU code), then the one draw it ends with (recovered or bonus).
// The ordered double sums run on one thread over the row's nonzero entries,
// compacted in order by the block (the recipe's order cannot be
// parallelised without changing its rounding); they dominate the cost for
// large vocabularies and dense rows.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/cuda_util.h"
#include "spec/sampling.h"
#include "spec/verify.h"

namespace specserve::cuda {

struct VerifyBatchArgs {
  const float* logits = nullptr;         // [batch, max_k + 1, vocab] device; sequence b uses rows 0..k[b]
  int32_t batch = 0;
  int32_t max_k = 0;                     // 0..kMaxVerifyK
  int32_t vocab = 0;
  // Where sequence b's rows start in logits ([batch]); nullptr: row
  // b * (max_k + 1) of a [batch, max_k + 1, vocab] array. When set, every
  // row read is clamped to [0, logits_rows), so a bad offset reads wrong
  // rows, never outside the array.
  const int64_t* logits_row = nullptr;
  int64_t logits_rows = 0;
  const int32_t* k = nullptr;            // [batch] drafted tokens per sequence, 0..max_k
  const int32_t* draft_tokens = nullptr; // [batch, max_k]
  // Sparse q of draft token (b, i), j = b * max_k + i: entries
  // [q_offsets[j], q_offsets[j + 1]) of q_ids / q_probs, in the order sent.
  const int32_t* q_offsets = nullptr;    // [batch * max_k + 1]
  // Entries in q_ids / q_probs: the kernel clamps every offset to
  // [0, q_count], so offsets that are out of order or too large read
  // nothing outside the arrays (they only make q empty).
  int32_t q_count = 0;
  const int32_t* q_ids = nullptr;
  const float* q_probs = nullptr;
  const SamplingParams* params = nullptr;     // [batch] the target's (user's) rule
  const uint64_t* first_position = nullptr;   // [batch] absolute position of d_1
  int32_t* accepted = nullptr;           // [batch] out: n
  int32_t* next_token = nullptr;         // [batch] out: x
  uint8_t* accept_flags = nullptr;       // [batch, max_k] out, optional: 1 where d_{i+1} was accepted
  void* workspace = nullptr;             // >= VerifyWorkspaceBytes(batch, max_k, vocab), device
  size_t workspace_bytes = 0;
};

size_t VerifyWorkspaceBytes(int32_t batch, int32_t max_k, int32_t vocab);

// Device inputs are trusted to satisfy ValidateVerifyInput (DeviceVerifier
// checks them on the host); the kernels never read or write out of bounds
// even when they do not. INVALID_ARGUMENT for bad sizes or null pointers.
absl::Status LaunchVerifyResample(const VerifyBatchArgs& a, cudaStream_t stream);

// What one verify launch cost: the kernels' device time (CUDA events) and
// the bytes copied back (accepted, next token and K flags per sequence).
struct DeviceVerifyStats {
  double kernel_seconds = 0;
  int64_t bytes_to_host = 0;
};

// Host-side driver: validates VerifyInputs exactly as Verify does, uploads
// the blocks and rules, runs both kernels on `stream` and copies back O(K)
// bytes per sequence. Keeps its device buffers between calls (one per
// thread; not thread-safe). accept_mask is filled from the kernel's flags.
class DeviceVerifier {
 public:
  DeviceVerifier() = default;
  ~DeviceVerifier();
  DeviceVerifier(const DeviceVerifier&) = delete;
  DeviceVerifier& operator=(const DeviceVerifier&) = delete;

  // Host logits: inputs[b].target_logits ([k_b + 1, vocab]) are uploaded.
  absl::StatusOr<std::vector<VerifyResult>> Run(absl::Span<const VerifyInput> inputs, cudaStream_t stream,
                                                DeviceVerifyStats* stats = nullptr);
  // Logits already on the device: sequence b's k_b + 1 rows start at row
  // logits_row[b] of `logits` ([rows, vocab], device); target_logits is
  // ignored. INVALID_ARGUMENT when a sequence's rows leave [0, rows).
  absl::StatusOr<std::vector<VerifyResult>> RunOnDevice(absl::Span<const VerifyInput> inputs, const float* logits,
                                                        absl::Span<const int64_t> logits_row, int64_t rows,
                                                        cudaStream_t stream, DeviceVerifyStats* stats = nullptr);

 private:
  absl::StatusOr<std::vector<VerifyResult>> Launch(absl::Span<const VerifyInput> inputs, const float* logits,
                                                   absl::Span<const int64_t> logits_row, int64_t rows,
                                                   cudaStream_t stream, DeviceVerifyStats* stats);
  DeviceBuffer logits_, meta_, workspace_;
  std::vector<char> host_meta_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace specserve::cuda
