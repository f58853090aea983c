// Paged KV cache bookkeeping: a fixed pool of blocks of `block_size` token
// slots, and a block table per sequence (vLLM's PagedAttention layout).
// The pool hands out block ids; the backend owns the storage behind them
// (host memory on the CPU, device memory on CUDA), so this file is shared.
//
// A sequence keeps two lengths apart: `length` is how many positions hold
// valid keys/values (the committed prefix), `capacity()` is how many slots
// its blocks provide. Rollback is Truncate(): a metadata change that returns
// the blocks past the new length to the pool (gpt-fast's KVCache.update
// writes by position, so nothing needs erasing).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace specserve {

struct KvSeq {
  std::vector<int32_t> blocks;  // block table: position p lives in blocks[p / block_size]
  int32_t length = 0;           // positions [0, length) are valid
};

class KvPool {
 public:
  KvPool(int32_t num_blocks, int32_t block_size);
  ~KvPool();
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  // Grows `seq` so that positions [0, n_positions) have slots. On
  // RESOURCE_EXHAUSTED the sequence is left exactly as it was.
  absl::Status Reserve(KvSeq& seq, int32_t n_positions);
  // Rolls back to `length` (<= seq.length) and frees blocks no longer needed.
  void Truncate(KvSeq& seq, int32_t length);
  // Returns every block of `seq` to the pool.
  void Release(KvSeq& seq);

  int32_t block_size() const { return block_size_; }
  int32_t num_blocks() const { return num_blocks_; }
  int32_t free_blocks() const;
  int32_t used_blocks() const { return num_blocks_ - free_blocks(); }
  static int32_t BlocksFor(int32_t n_positions, int32_t block_size) {
    return (n_positions + block_size - 1) / block_size;
  }

 private:
  const int32_t num_blocks_;
  const int32_t block_size_;
  mutable absl::Mutex mu_;
  std::vector<int32_t> free_ ABSL_GUARDED_BY(mu_);  // stack of free block ids
};

}  // namespace specserve
