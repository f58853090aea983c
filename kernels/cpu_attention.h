// CPU reference of causal attention over a paged KV cache (one sequence).
// Serves prefill, one-token decode and the (K+1)-token verify pass alike:
// query token t attends to cached positions [0, positions[t]].
#pragma once

#include <cstdint>

namespace specserve::cpu {

struct PagedAttentionArgs {
  const float* q;            // [T, n_head * head_dim], already rotated
  const int32_t* positions;  // [T] absolute positions, increasing
  int64_t T;
  const float* k_cache;      // [num_blocks, n_head_kv, head_dim, block_size] (one layer; StoreKeys)
  const float* v_cache;      // [num_blocks, block_size, n_head_kv * head_dim]
  const int32_t* block_table;// position p is slot p % block_size of block_table[p / block_size]
  int32_t n_head;
  int32_t n_head_kv;         // grouped-query: query head h reads kv head h / (n_head / n_head_kv)
  int32_t head_dim;
  int32_t block_size;
  float scale;               // 1 / sqrt(head_dim)
  float* out;                // [T, n_head * head_dim]
};

// Query tokens are taken kAttentionTokenChunk at a time, so that every key and
// value row read from the cache serves all of them and all the query heads of
// its group (a verify pass of K+1 tokens reads the cache once, not K+1 times).
inline constexpr int kAttentionTokenChunk = 8;
// KV heads taken together (a model with one query head per KV head decodes
// with that many independent queries at once).
inline constexpr int kHeadsPerChunk = 3;

// The key cache holds each block transposed per KV head: a block's keys of
// one head are head_dim rows of block_size floats, so that a vector of
// consecutive floats holds one dimension of consecutive keys and a score is
// a chain of FMAs with no horizontal sum. Writes one position's keys k
// [n_head_kv * head_dim] into slot `slot` of block `block`.
void StoreKeys(const float* k, int32_t n_head_kv, int32_t head_dim, int32_t block_size, int64_t block,
               int32_t slot, float* k_cache);

// Floats of scratch PagedAttention needs per call.
int64_t PagedAttentionScratch(const PagedAttentionArgs& a);

// Computes the kv heads [begin, end) of n_head_kv: for each, every token and
// every query head of its group. Callers split kv heads across threads.
//
// Numerics: a score is scale * s with s = (a0 + a1) + (a2 + a3), a_r the
// FMA chain over the dimensions d = r mod 4 in increasing order (from +0);
// softmax as written in cpu_attention.cc; a value sum is one FMA chain per
// output element over the keys in order (from +0). Nothing depends on the
// pass's tokens, the queries computed together, the vector width (AVX2 or
// AVX-512, chosen at run time as the matmul's, kernels/cpu_matmul_avx512.h)
// or the thread, so a token's output has the bits of one-token decoding.
void PagedAttention(const PagedAttentionArgs& a, int64_t begin, int64_t end, float* scratch);

}  // namespace specserve::cpu
