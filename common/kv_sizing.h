// How many KV blocks a backend's pool takes when --kv-blocks is 0: the pure
// arithmetic, kept apart from the backends so it is tested on the CPU
// (tests/kv_sizing_test.cc).
//
// The CPU backend uses DefaultKvBlocks (common/backend.h): --max-sessions
// full contexts, capped at --kv-memory-mib (1024 MiB when not given). The
// CUDA backend sizes its pool after the weights are uploaded and its
// activation workspaces allocated, from the device's free memory
// (KvBlocksFromFreeMemory): it keeps kKvHeadroom free for what grows later
// (cuBLAS workspaces, larger passes' activations, the verify workspace,
// fragmentation) and takes at most what the rest holds, never more than
// --max-sessions full contexts need, and never more than --kv-memory-mib
// when that flag is given.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/backend.h"
#include "common/model_config.h"

namespace specserve {

// --kv-memory-mib when the flag is not given (BackendOptions::kv_memory_mib
// 0) on a backend that does not size from free memory (the CPU).
inline constexpr int64_t kDefaultKvMemoryMib = 1024;

// What the CUDA backend leaves free after its KV pool: the larger of 1 GiB
// and 10% of the free memory it measured.
inline constexpr int64_t kKvHeadroomMinBytes = int64_t{1} << 30;
inline constexpr int64_t kKvHeadroomPercent = 10;
int64_t KvHeadroomBytes(int64_t free_bytes);

// Bytes one position of the cache takes: fp32 keys and values of every layer.
int64_t KvBytesPerPosition(const ModelConfig& c);

// Which limit set the pool's size.
enum class KvLimit {
  kBlocksFlag,   // --kv-blocks N given
  kSessions,     // --max-sessions full contexts fit
  kMemoryFlag,   // --kv-memory-mib
  kFreeMemory,   // the device's free memory, less the headroom
};

struct KvPoolSize {
  int32_t blocks = 0;
  KvLimit limit = KvLimit::kSessions;
  int64_t free_bytes = 0;       // measured free device memory (KvBlocksFromFreeMemory only)
  int64_t headroom_bytes = 0;   // of that, kept free
  // For the start-up line: "4096 blocks of 16 (1024 MiB): --max-sessions 64 full contexts".
  std::string Describe(int32_t block_size, int64_t bytes_per_position, int32_t contexts) const;
};

// The pool from free device memory. free_bytes: what cudaMemGetInfo reports
// after the weights and workspaces. blocks = the least of
//   (free_bytes - KvHeadroomBytes(free_bytes)) / bytes per block,
//   BlocksFor(n_ctx) * max(1, opts.kv_contexts),
//   (opts.kv_memory_mib MiB) / bytes per block when opts.kv_memory_mib > 0,
//     but never below one full context (as DefaultKvBlocks),
// capped at INT32_MAX / 2. RESOURCE_EXHAUSTED when that is less than one full
// context: the message says how many MiB are free, what one context needs,
// and names --kv-blocks, --max-sessions and a model with a smaller context.
absl::StatusOr<KvPoolSize> KvBlocksFromFreeMemory(const ModelConfig& c, const BackendOptions& opts,
                                                  int64_t bytes_per_position, int64_t free_bytes);

}  // namespace specserve
