#include "common/kv_cache.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace specserve {

KvPool::KvPool(int32_t num_blocks, int32_t block_size)
    : num_blocks_(num_blocks), block_size_(block_size) {
  SPECSERVE_CHECK(num_blocks > 0);
  SPECSERVE_CHECK(block_size > 0);
  free_.reserve(num_blocks);
  // Low ids on top of the stack so a fresh pool fills from block 0.
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
  refs_.assign(num_blocks, 0);
  published_.resize(num_blocks);
  lru_pos_.resize(num_blocks, lru_.end());
}

KvPool::~KvPool() = default;

int32_t KvPool::free_blocks() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int32_t>(free_.size() + lru_.size());
}

// FNV-1a over the parent hash and the token ids; never 0 (0 is "none").
uint64_t KvPool::ChainHash(uint64_t parent, absl::Span<const TokenId> tokens) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i, v >>= 8) h = (h ^ (v & 0xff)) * 1099511628211ull;
  };
  mix(parent);
  for (TokenId t : tokens) mix(static_cast<uint32_t>(t));
  return h == 0 ? 1 : h;
}

void KvPool::UnpublishLocked(int32_t b) {
  Published& p = published_[b];
  if (p.tokens.empty()) return;
  auto it = by_hash_.find(p.hash);
  if (it != by_hash_.end() && it->second == b) by_hash_.erase(it);
  p = Published{};
}

// A block for a new position: a free one, else the least recently used
// cached one (forgotten by the cache).
int32_t KvPool::TakeBlockLocked() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {
    SPECSERVE_CHECK(!lru_.empty());
    b = lru_.front();
    lru_.pop_front();
    lru_pos_[b] = lru_.end();
    UnpublishLocked(b);
  }
  refs_[b] = 1;
  return b;
}

// One holder lets go of block b.
void KvPool::DropBlockLocked(int32_t b) {
  SPECSERVE_CHECK(refs_[b] > 0);
  if (--refs_[b] > 0) return;
  if (!published_[b].tokens.empty()) {
    lru_pos_[b] = lru_.insert(lru_.end(), b);
  } else {
    free_.push_back(b);
  }
}

absl::Status KvPool::Reserve(KvSeq& seq, int32_t n_positions) {
  const int32_t need = BlocksFor(n_positions, block_size_) - static_cast<int32_t>(seq.blocks.size());
  if (need <= 0) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  const size_t available = free_.size() + lru_.size();
  if (static_cast<size_t>(need) > available) {
    return absl::ResourceExhaustedError(absl::StrCat("KV cache full: need ", need, " more blocks of ", block_size_,
                                                     " tokens, ", available, " of ", num_blocks_, " free"));
  }
  for (int32_t i = 0; i < need; ++i) seq.blocks.push_back(TakeBlockLocked());
  return absl::OkStatus();
}

void KvPool::Truncate(KvSeq& seq, int32_t length) {
  SPECSERVE_CHECK(length >= 0);
  SPECSERVE_CHECK(length <= seq.length);  // truncate never grows a sequence
  seq.length = length;
  const size_t keep = BlocksFor(length, block_size_);
  absl::MutexLock lock(&mu_);
  // The block that the next write lands in must be this sequence's alone: a
  // rollback into a published block takes it out of the cache, and one into
  // a block another sequence shares is a bug (shared blocks lie before every
  // sharer's length, and sequences never roll back below their prompt).
  if (length % block_size_ != 0 && keep > 0 && keep <= seq.blocks.size()) {
    const int32_t b = seq.blocks[keep - 1];
    SPECSERVE_CHECK(refs_[b] == 1);
    UnpublishLocked(b);
  }
  while (seq.blocks.size() > keep) {
    DropBlockLocked(seq.blocks.back());
    seq.blocks.pop_back();
  }
}

void KvPool::Release(KvSeq& seq) { Truncate(seq, 0); }

int32_t KvPool::AttachPrefix(KvSeq& seq, absl::Span<const TokenId> tokens) {
  SPECSERVE_CHECK(seq.blocks.empty() && seq.length == 0);
  if (!prefix_cache_) return 0;
  const size_t whole = tokens.size() / block_size_;
  if (whole == 0) return 0;
  absl::MutexLock lock(&mu_);
  ++stats_.queries;
  uint64_t parent = 0;
  for (size_t i = 0; i < whole; ++i) {
    const auto block_tokens = tokens.subspan(i * block_size_, block_size_);
    const uint64_t h = ChainHash(parent, block_tokens);
    auto it = by_hash_.find(h);
    if (it == by_hash_.end()) break;
    const int32_t b = it->second;
    const Published& p = published_[b];
    if (p.parent != parent || !std::equal(p.tokens.begin(), p.tokens.end(), block_tokens.begin(), block_tokens.end())) {
      break;  // a hash collision: treat as a miss
    }
    if (refs_[b]++ == 0) {  // was cached with no holder: in use again
      lru_.erase(lru_pos_[b]);
      lru_pos_[b] = lru_.end();
    }
    seq.blocks.push_back(b);
    parent = h;
  }
  seq.length = static_cast<int32_t>(seq.blocks.size()) * block_size_;
  if (!seq.blocks.empty()) {
    ++stats_.hits;
    stats_.hit_tokens += seq.length;
  }
  return seq.length;
}

void KvPool::PublishPrefix(const KvSeq& seq, absl::Span<const TokenId> tokens) {
  if (!prefix_cache_) return;
  SPECSERVE_CHECK(tokens.size() <= static_cast<size_t>(seq.length));
  const size_t whole = tokens.size() / block_size_;
  absl::MutexLock lock(&mu_);
  uint64_t parent = 0;
  for (size_t i = 0; i < whole; ++i) {
    const auto block_tokens = tokens.subspan(i * block_size_, block_size_);
    const uint64_t h = ChainHash(parent, block_tokens);
    const int32_t b = seq.blocks[i];
    Published& p = published_[b];
    if (p.tokens.empty() && by_hash_.find(h) == by_hash_.end()) {
      p.hash = h;
      p.parent = parent;
      p.tokens.assign(block_tokens.begin(), block_tokens.end());
      by_hash_[h] = b;
    }
    parent = h;
  }
}

KvPool::PrefixStats KvPool::prefix_stats() const {
  absl::MutexLock lock(&mu_);
  PrefixStats s = stats_;
  s.cached_blocks = static_cast<int32_t>(lru_.size());
  return s;
}

}  // namespace specserve
