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
  void* workspace = nullptr;             // >= VerifyWorkspaceBytes(batch, max_k, vocab), device
  size_t workspace_bytes = 0;
};

size_t VerifyWorkspaceBytes(int32_t batch, int32_t max_k, int32_t vocab);

// Device inputs are trusted to satisfy ValidateVerifyInput (DeviceVerifier
// checks them on the host); the kernels never read or write out of bounds
// even when they do not. INVALID_ARGUMENT for bad sizes or null pointers.
absl::Status LaunchVerifyResample(const VerifyBatchArgs& a, cudaStream_t stream);

// Host-side driver: validates VerifyInputs exactly as Verify does, uploads
// them, runs both kernels on `stream` and returns the results. Keeps its
// device buffers between calls (one per thread; not thread-safe).
class DeviceVerifier {
 public:
  absl::StatusOr<std::vector<VerifyResult>> Run(absl::Span<const VerifyInput> inputs,
                                                cudaStream_t stream);

 private:
  DeviceBuffer logits_, meta_, workspace_;
  std::vector<char> host_meta_;
};

}  // namespace specserve::cuda
