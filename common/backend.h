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
#include "common/model_config.h"
#include "common/weights.h"

namespace specserve {

using TokenId = int32_t;

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
  // contexts capped at kv_memory_mib of cache (DefaultKvBlocks).
  int32_t kv_blocks = 0;
  int32_t kv_contexts = 8;     // a service passes its --max-sessions
  int64_t kv_memory_mib = 1024;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Appends each sequence's tokens to its cache and writes logits
  // [sum(n_logits), vocab] in batch order. Errors: INVALID_ARGUMENT (token id
  // out of range, context overflow, bad n_logits), RESOURCE_EXHAUSTED (KV
  // pool full). On error no sequence's length has changed.
  virtual absl::Status Forward(absl::Span<const ForwardSeq> batch, std::vector<float>* logits) = 0;

  virtual KvPool& kv_pool() = 0;
  virtual const ModelConfig& config() const = 0;
  virtual std::string name() const = 0;
};

// Checks a batch against the config and reserves KV slots for it; shared by
// the backends so they refuse bad input identically.
// The default pool of a backend whose cache takes `bytes_per_position`
// (keys and values of every layer): kv_contexts full contexts, at most
// kv_memory_mib of memory, at least one full context.
int32_t DefaultKvBlocks(const ModelConfig& c, const BackendOptions& opts, int64_t bytes_per_position);

absl::Status PrepareBatch(absl::Span<const ForwardSeq> batch, const ModelConfig& c, KvPool& pool);

}  // namespace specserve
