// Causal attention over the paged KV cache on the device, for a ragged batch
// of query tokens: one-token decode, the (K+1)-token verify pass and prefill
// alike. Query token t of sequence s attends to its cached positions
// [0, positions[t]] (its own key and value are stored before the call).
// CPU reference: cpu::PagedAttention (kernels/cpu_attention.h).
//
// Online softmax (Milakov & Gimelshein 2018, as in FlashAttention, Dao et al.
// 2022): no score matrix is materialised. A block handles one query token and
// one KV head with its grouped query heads (GQA: each K/V row is read once for
// the group); its warps take tiles of 32 keys, one key per lane for the
// scores, then all lanes accumulate the tile's values. The keys are split
// across blocks in fixed chunks of kAttentionKeyChunk and a second kernel
// merges the partial softmaxes in chunk order (flash-decoding, Dao et al.
// 2023). The chunk never depends on the pass (kernels/attention_plan.h), so
// a token's output has the same bits in any pass shape and batch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace specserve::cuda {

struct PagedAttentionArgs {
  const float* q = nullptr;             // [T, n_head * head_dim] device, already rotated
  const int32_t* positions = nullptr;   // [T] absolute position of each query token
  const int32_t* token_seq = nullptr;   // [T] sequence index of each query token
  const int32_t* block_tables = nullptr;// all sequences' block tables, concatenated
  const int32_t* table_offset = nullptr;// [n_seqs] start of sequence s's table in block_tables
  int64_t T = 0;
  int32_t max_keys = 0;                 // >= positions[t] + 1 for every t (host-side bound)
  const float* k_cache = nullptr;       // [num_blocks, block_size, n_head_kv * head_dim], one layer
  const float* v_cache = nullptr;       // same layout
  int32_t n_head = 0;
  int32_t n_head_kv = 0;                // query head h reads kv head h / (n_head / n_head_kv)
  int32_t head_dim = 0;                 // multiple of 4, <= 256
  int32_t block_size = 0;
  float scale = 0.0f;                   // 1 / sqrt(head_dim)
  float* out = nullptr;                 // [T, n_head * head_dim]
  void* workspace = nullptr;            // >= PagedAttentionWorkspaceBytes(...) bytes, device
  size_t workspace_bytes = 0;
};

// Scratch for the split-key path (0 when the launch needs no split).
size_t PagedAttentionWorkspaceBytes(int64_t T, int32_t n_head, int32_t n_head_kv, int32_t head_dim,
                                    int32_t max_keys);

absl::Status LaunchPagedAttention(const PagedAttentionArgs& a, cudaStream_t stream);

}  // namespace specserve::cuda
