// The model runtime's one entry point for compute: a forward pass over a
// ragged batch. CPU and CUDA implement it (backends/, made by
// backends/make_backend.h); everything above (draft service,
// target service, the in-process speculative loop) only sees this.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/kv_cache.h"
#include "common/matmul_activations.h"
#include "common/model_config.h"
#include "common/weights.h"

namespace specserve {

using TokenId = int32_t;
struct VerifyInput;   // spec/verify.h
struct VerifyResult;  // spec/verify.h
struct DraftSampleInput;  // spec/forward_sample.h
struct DraftSample;       // spec/forward_sample.h

// One sequence of a ragged batch: its cache and the tokens to append at
// positions [kv->length, kv->length + tokens.size()).
struct ForwardSeq {
  KvSeq* kv;
  absl::Span<const TokenId> tokens;
  int32_t n_logits;  // logits for the last n_logits new tokens (0..tokens.size())
};

struct BackendOptions {
  std::string kind = "cpu";  // "cpu" or "cuda"
  int device = 0;            // CUDA device index
  int threads = 1;           // CPU worker threads (the caller's thread included)
  // A pool to share with other backends in this process (a draft and a target
  // taking turns on the same cores); overrides `threads` when set.
  std::shared_ptr<class ThreadPool> shared_pool;
  int32_t kv_block_size = 16;
  // The KV pool: kv_blocks blocks, or when 0, room for kv_contexts full
  // contexts capped at kv_memory_mib of cache (common/kv_sizing.h): on the
  // CPU DefaultKvBlocks; on CUDA also capped by the device's free memory
  // after the weights (KvBlocksFromFreeMemory).
  int32_t kv_blocks = 0;
  int32_t kv_contexts = 8;     // a service passes its --max-sessions
  // --kv-memory-mib; 0: not given (the CPU caps at kDefaultKvMemoryMib,
  // CUDA at what its free memory holds).
  int64_t kv_memory_mib = 0;
  // --cpu-activations: int8 (llama.cpp-style quantized activations for
  // quantized weights, the default) or fp32 (exact products of the
  // dequantized weights; common/matmul_activations.h). The CPU backend only;
  // CUDA ignores it.
  MatMulActivations cpu_activations = MatMulActivations::kInt8;
};

// What one ForwardVerify call gives back.
struct VerifyBatchOutput {
  std::vector<VerifyResult> results;  // [batch]: where verify[i] != nullptr
  std::vector<float> logits;          // [rows, vocab] host rows of the sequences without a block
  std::vector<int64_t> first_row;     // [batch]: where such a sequence's rows start in logits
  double verify_seconds = 0;          // the rule alone (on CUDA: the kernels' device time)
  int64_t bytes_to_host = 0;          // device -> host bytes of the call (0 on the CPU)
};

// What one ForwardSample call gives back.
struct SampleBatchOutput {
  std::vector<DraftSample> samples;   // [batch]: where sample[i] != nullptr, the token and its q
  std::vector<float> logits;          // [rows, vocab] host rows of the sequences without a rule
  std::vector<int64_t> first_row;     // [batch]: where such a sequence's rows start in logits
  double sample_seconds = 0;          // the sampling alone (on CUDA: the kernel's device time)
  int64_t bytes_to_host = 0;          // device -> host bytes of the call (0 on the CPU)
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Appends each sequence's tokens to its cache and writes logits
  // [sum(n_logits), vocab] in batch order. Errors: INVALID_ARGUMENT (token id
  // out of range, context overflow, bad n_logits), RESOURCE_EXHAUSTED (KV
  // pool full). On error no sequence's length has changed.
  virtual absl::Status Forward(absl::Span<const ForwardSeq> batch, std::vector<float>* logits) = 0;

  // Forward, and also the target's features of the same rows as the logits:
  // features [sum(n_logits), n_embd], the last layer's residual stream
  // before the final RMSNorm (what an EAGLE draft head reads,
  // common/eagle_head.h). UNIMPLEMENTED on a backend that cannot (the
  // default); errors otherwise as Forward's.
  virtual absl::Status ForwardFeatures(absl::Span<const ForwardSeq> batch, std::vector<float>* logits,
                                       std::vector<float>* features) {
    return absl::UnimplementedError(name() + " cannot return features (Backend::ForwardFeatures)");
  }

  // The verify step, run where the backend keeps its logits: Forward over
  // the batch, then for each sequence i with verify[i] != nullptr the
  // verify-and-resample rule (spec/verify.h) on its k + 1 logits rows
  // (batch[i].n_logits must be verify[i]->k + 1; verify[i]->target_logits
  // is ignored: the backend supplies the rows). A sequence without a block
  // (a prefill, or a round that needs its logits on the host) gets its
  // n_logits rows in out->logits at out->first_row[i], as Forward would.
  // The CPU backend runs Forward and the CPU Verify; the CUDA backend keeps
  // the logits on the device, verifies the whole batch in one launch and
  // copies back O(K) bytes per verified sequence. Errors as Forward's, plus
  // INVALID_ARGUMENT for a malformed block (checked before the pass, so on
  // error no sequence's length has changed).
  virtual absl::Status ForwardVerify(absl::Span<const ForwardSeq> batch,
                                     absl::Span<const VerifyInput* const> verify, VerifyBatchOutput* out) = 0;
  // Where ForwardVerify runs the rule: "cpu" or "cuda".
  virtual std::string verify_location() const = 0;
  // Bytes ForwardVerify has copied device -> host so far, all calls together
  // (0 on the CPU backend, whose logits never leave host memory).
  virtual int64_t verify_bytes_to_host() const { return 0; }

  // The draft step, run where the backend keeps its logits: Forward over the
  // batch, then for each sequence i with sample[i] != nullptr the draft's
  // rule (spec/forward_sample.h: DraftDistribution, then SampleSparse with
  // the position's kDraftSample draw) on its one logits row (batch[i].n_logits
  // must be 1). A sequence without a rule (a prefill) gets its n_logits rows
  // in out->logits at out->first_row[i], as Forward would. The CPU backend
  // runs Forward and the host sampling; the CUDA backend samples the whole
  // batch on the device in one launch and copies back the tokens and top-N
  // entries only, O(N) bytes per sequence. Errors as Forward's, plus
  // INVALID_ARGUMENT for a bad rule (checked before the pass).
  virtual absl::Status ForwardSample(absl::Span<const ForwardSeq> batch,
                                     absl::Span<const DraftSampleInput* const> sample, SampleBatchOutput* out) = 0;
  // Where ForwardSample samples: "cpu" or "cuda".
  virtual std::string sample_location() const = 0;
  // Bytes ForwardSample has copied device -> host so far, all calls together.
  virtual int64_t sample_bytes_to_host() const { return 0; }

  virtual KvPool& kv_pool() = 0;
  virtual const ModelConfig& config() const = 0;
  virtual std::string name() const = 0;
};

// The default pool of a backend whose cache takes `bytes_per_position`
// (keys and values of every layer): kv_contexts full contexts, at most
// kv_memory_mib of memory (kDefaultKvMemoryMib when 0), at least one full
// context.
int32_t DefaultKvBlocks(const ModelConfig& c, const BackendOptions& opts, int64_t bytes_per_position);

// Checks a batch against the config and reserves KV slots for it; shared by
// the backends so they refuse bad input identically.
absl::Status PrepareBatch(absl::Span<const ForwardSeq> batch, const ModelConfig& c, KvPool& pool);

}  // namespace specserve
