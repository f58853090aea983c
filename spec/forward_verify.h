// The pieces of Backend::ForwardVerify (common/backend.h) every backend
// shares: the request's checks, made before any pass so that a refused
// request changes nothing, and the host implementation (Forward to host
// logits, then the CPU Verify per sequence) that the CPU backend uses.
#pragma once

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/backend.h"
#include "spec/verify.h"

namespace specserve {

// INVALID_ARGUMENT unless verify.size() == batch.size() and every block
// satisfies ValidateVerifyInput (its target_logits aside) with
// vocab == config.vocab and batch[i].n_logits == verify[i]->k + 1.
absl::Status ValidateForwardVerify(absl::Span<const ForwardSeq> batch, absl::Span<const VerifyInput* const> verify,
                                   const ModelConfig& config);

// Forward into out->logits (every sequence's rows: first_row counts them
// all), then Verify on the rows of each sequence with a block.
// out->verify_seconds is the Verify calls' wall time; bytes_to_host is 0.
absl::Status ForwardVerifyOnHost(Backend& backend, absl::Span<const ForwardSeq> batch,
                                 absl::Span<const VerifyInput* const> verify, VerifyBatchOutput* out);

}  // namespace specserve
