// The device attention's key split, in plain C++ so host tests check it
// (kernels/cuda_attention.cu).
//
// Batch invariance: the keys of every query token are cut at multiples of
// kAttentionKeyChunk, whatever the pass's token count, batch or longest
// sequence, and the chunks' partial softmaxes are merged in chunk order; a
// chunk past a token's last key contributes nothing. So a token's output
// has the same bits in a one-token decode, a (K+1)-token verify pass and any
// batch. Launches are sliced by tokens so the partials stay within
// kAttentionPartBytes of scratch.
#pragma once

#include <algorithm>
#include <cstdint>

namespace specserve {

inline constexpr int32_t kAttentionKeyChunk = 256;  // a multiple of the 4 warps x 32 keys of a block's sweep
inline constexpr int64_t kAttentionPartBytes = int64_t{256} << 20;

// Chunks covering max_keys keys (>= 1).
inline int32_t AttentionSplits(int32_t max_keys) {
  return std::max<int32_t>(1, (max_keys + kAttentionKeyChunk - 1) / kAttentionKeyChunk);
}

// Query tokens per launch (1..T): as many as keep the partials within
// kAttentionPartBytes.
inline int64_t AttentionSliceTokens(int64_t T, int32_t n_head, int32_t head_dim, int32_t max_keys) {
  const int64_t per_token = int64_t{n_head} * AttentionSplits(max_keys) * (head_dim + 2) * int64_t{sizeof(float)};
  return std::clamp<int64_t>(kAttentionPartBytes / std::max<int64_t>(per_token, 1), 1, std::max<int64_t>(T, 1));
}

// Scratch bytes for the partials of one launch of min(T, slice) tokens.
inline int64_t AttentionPartBytes(int64_t T, int32_t n_head, int32_t head_dim, int32_t max_keys) {
  if (T <= 0 || n_head < 1 || max_keys < 1) return 0;
  const int64_t slice = AttentionSliceTokens(T, n_head, head_dim, max_keys);
  return slice * n_head * AttentionSplits(max_keys) * (head_dim + 2) * int64_t{sizeof(float)};
}

}  // namespace specserve
