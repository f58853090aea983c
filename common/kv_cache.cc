#include "common/kv_cache.h"

#include <cstdlib>

#include "common/check.h"
#include "absl/strings/str_cat.h"

namespace specserve {

KvPool::KvPool(int32_t num_blocks, int32_t block_size)
    : num_blocks_(num_blocks), block_size_(block_size) {
  SPECSERVE_CHECK(num_blocks > 0);
  SPECSERVE_CHECK(block_size > 0);
  free_.reserve(num_blocks);
  // Low ids on top of the stack so a fresh pool fills from block 0.
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

KvPool::~KvPool() = default;

int32_t KvPool::free_blocks() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int32_t>(free_.size());
}

absl::Status KvPool::Reserve(KvSeq& seq, int32_t n_positions) {
  const int32_t need = BlocksFor(n_positions, block_size_) - static_cast<int32_t>(seq.blocks.size());
  if (need <= 0) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  if (need > static_cast<int32_t>(free_.size())) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "KV cache full: need ", need, " more blocks of ", block_size_, " tokens, ",
        free_.size(), " of ", num_blocks_, " free"));
  }
  for (int32_t i = 0; i < need; ++i) {
    seq.blocks.push_back(free_.back());
    free_.pop_back();
  }
  return absl::OkStatus();
}

void KvPool::Truncate(KvSeq& seq, int32_t length) {
  SPECSERVE_CHECK(length >= 0);
  SPECSERVE_CHECK(length <= seq.length);  // truncate never grows a sequence
  seq.length = length;
  const size_t keep = BlocksFor(length, block_size_);
  if (keep >= seq.blocks.size()) return;
  absl::MutexLock lock(&mu_);
  while (seq.blocks.size() > keep) {
    free_.push_back(seq.blocks.back());
    seq.blocks.pop_back();
  }
}

void KvPool::Release(KvSeq& seq) {
  Truncate(seq, 0);
}

}  // namespace specserve
