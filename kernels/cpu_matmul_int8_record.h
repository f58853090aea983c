// Internal to kernels/: the Int8Activations record helpers that the portable
// kernel (cpu_matmul_int8_portable.cc) and the VNNI kernel
// (cpu_matmul_int8.cc) share. The record's layout is documented in
// kernels/cpu_matmul_int8.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/check.h"
#include "kernels/cpu_matmul_int8.h"

namespace specserve::cpu::int8_record {

constexpr int64_t kBlock = 32;  // activation block, and every chunk of a weight row
constexpr int64_t kPair = 64;   // values per 16-lane step

// The weight type's integer offset o (kernels/cpu_matmul_int8.h).
inline int Offset(GgmlType t) {
  switch (t) {
    case GgmlType::kQ8_0: return 128;
    case GgmlType::kQ5_0: return 16;
    case GgmlType::kQ6_K: return 32;
    default: return 0;  // Q4_K: unsigned nibbles, the min is a float term
  }
}

inline uint16_t U16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return h;
}

inline void Resize(GgmlType type, int64_t T, int64_t n, Int8Activations& out) {
  SPECSERVE_CHECK(n % kBlock == 0 && T >= 0);
  out.type = type;
  out.T = T;
  out.n = n;
  out.pairs = (n + kPair - 1) / kPair;
  out.supers = type == GgmlType::kQ4_K ? n / 256 : 0;
  out.blocks = type == GgmlType::kQ8_0 ? n / kBlock : 0;
  out.subs = type == GgmlType::kQ6_K ? n / 16 : 0;
  if (out.block_bias.size() < static_cast<size_t>(T * out.blocks)) out.block_bias.resize(T * out.blocks);
  if (out.sub_bias.size() < static_cast<size_t>(T * out.subs)) out.sub_bias.resize(T * out.subs);
  if (out.pair.size() < static_cast<size_t>(T * out.pairs)) out.pair.resize(T * out.pairs);
  if (out.ms.size() < static_cast<size_t>(T * out.supers)) out.ms.resize(T * out.supers);
}

// Fills the lanes of one block h (0 or 1) of a pair from q[32] and d, and
// returns S (the sum of q).
inline int32_t FinishBlock(Int8Pair& rec, int h, float d, int offset) {
  int32_t s = 0;
  for (int l = 8 * h; l < 8 * h + 8; ++l) {
    int32_t s4 = 0;
    for (int k = 0; k < 4; ++k) s4 += rec.q[4 * l + k];
    rec.bias[l] = -offset * s4;
    rec.d[l] = d;
    s += s4;
  }
  return s;
}

// Q4_K: lanes 8..15 of the super-block's ms are d_b * float(S_b).
inline void SetMs(Int8Activations& out, int64_t t, int64_t block, float d, int32_t s) {
  if (out.supers == 0) return;
  Float16x& m = out.ms[t * out.supers + block / 8];
  if (block % 8 == 0) std::fill(m.v, m.v + 8, 0.0f);
  m.v[8 + block % 8] = d * static_cast<float>(s);
}

inline void ZeroBlock(Int8Pair& rec, int h) {
  std::memset(rec.q + 32 * h, 0, 32);
  for (int l = 8 * h; l < 8 * h + 8; ++l) {
    rec.bias[l] = 0;
    rec.d[l] = 0.0f;
  }
}

// The packed kernels' biases (kernels/cpu_matmul_packed.h), sums of the
// lanes' -o * S4: Q8_0's per block, -128 * S (8 lanes), Q6_K's per 16
// values, -32 * S16 (4 lanes). Call after the pairs are filled.
inline void SumBlockBiases(Int8Activations& out) {
  for (int64_t t = 0; t < out.T; ++t) {
    for (int64_t b = 0; b < out.blocks; ++b) {
      const Int8Pair& rec = out.pair[t * out.pairs + b / 2];
      int32_t s = 0;
      for (int l = 8 * (b % 2); l < 8 * (b % 2) + 8; ++l) s += rec.bias[l];
      out.block_bias[t * out.blocks + b] = s;
    }
    for (int64_t j = 0; j < out.subs; ++j) {
      const Int8Pair& rec = out.pair[t * out.pairs + j / 4];
      int32_t s = 0;
      for (int l = 4 * (j % 4); l < 4 * (j % 4) + 4; ++l) s += rec.bias[l];
      out.sub_bias[t * out.subs + j] = s;
    }
  }
}

}  // namespace specserve::cpu::int8_record
