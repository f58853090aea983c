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
//
// Prefix caching (EnablePrefixCache; the services turn it on): a full block
// can be shared by every sequence whose tokens up to the end of that block
// are the same. Published blocks are found by a hash of the tokens before
// and in them (checked token by token, so a hash collision only misses),
// reference-counted, and kept after their last sequence lets go until the
// pool needs the room (least recently used first). Shared blocks are full
// and lie before every sharer's length, and forward passes only write at or
// past a sequence's length, so shared keys and values are never overwritten.
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace specserve {

using TokenId = int32_t;

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

  // Prefix caching, off until enabled (then Attach and Publish do nothing
  // while it is off).
  void EnablePrefixCache() { prefix_cache_ = true; }
  bool prefix_cache() const { return prefix_cache_; }
  // For an empty `seq` about to cache `tokens` (positions 0..n-1): attaches
  // the published blocks that hold its longest cached prefix of whole
  // blocks and sets seq.length to the positions they cover (a multiple of
  // block_size, at most n). Returns that length; the caller computes only
  // tokens[length..).
  int32_t AttachPrefix(KvSeq& seq, absl::Span<const TokenId> tokens);
  // Publishes the whole blocks among the first tokens.size() positions of
  // `seq`, which hold `tokens` (tokens.size() <= seq.length), so that later
  // sequences can attach them. Blocks already published stay as they are.
  void PublishPrefix(const KvSeq& seq, absl::Span<const TokenId> tokens);

  struct PrefixStats {
    int64_t queries = 0;     // AttachPrefix calls with at least one whole block to look up
    int64_t hits = 0;        // of those, calls that attached at least one block
    int64_t hit_tokens = 0;  // positions attached instead of computed
    int32_t cached_blocks = 0;  // published blocks no sequence holds (reusable, evictable)
  };
  PrefixStats prefix_stats() const;

  int32_t block_size() const { return block_size_; }
  int32_t num_blocks() const { return num_blocks_; }
  // Blocks a Reserve can take: free ones plus cached ones no sequence holds.
  int32_t free_blocks() const;
  int32_t used_blocks() const { return num_blocks_ - free_blocks(); }
  static int32_t BlocksFor(int32_t n_positions, int32_t block_size) {
    return (n_positions + block_size - 1) / block_size;
  }

 private:
  // A published block: the hash of the tokens up to its end, and what the
  // hash stands for (checked on every lookup).
  struct Published {
    uint64_t hash = 0;
    uint64_t parent = 0;  // the previous block's hash (0 for the first)
    std::vector<TokenId> tokens;
  };
  static uint64_t ChainHash(uint64_t parent, absl::Span<const TokenId> tokens);
  int32_t TakeBlockLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropBlockLocked(int32_t b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UnpublishLocked(int32_t b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int32_t num_blocks_;
  const int32_t block_size_;
  bool prefix_cache_ = false;
  mutable absl::Mutex mu_;
  std::vector<int32_t> free_ ABSL_GUARDED_BY(mu_);  // stack of free block ids
  std::vector<int32_t> refs_ ABSL_GUARDED_BY(mu_);  // sequences holding each block
  std::vector<Published> published_ ABSL_GUARDED_BY(mu_);  // [num_blocks]; tokens empty: not published
  std::unordered_map<uint64_t, int32_t> by_hash_ ABSL_GUARDED_BY(mu_);
  // Published blocks with no holder, least recently used first, and where
  // each sits in that list.
  std::list<int32_t> lru_ ABSL_GUARDED_BY(mu_);
  std::vector<std::list<int32_t>::iterator> lru_pos_ ABSL_GUARDED_BY(mu_);
  PrefixStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace specserve
