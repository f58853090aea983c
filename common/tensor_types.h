// ggml tensor element types: block layout and row dequantisation.
// Block formats follow ggml-common.h (the reference implementation).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace specserve {

// Numbered as ggml's `enum ggml_type` (these numbers are stored in GGUF files).
enum class GgmlType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8,
  kQ8_1 = 9, kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14,
  kQ8_K = 15, kBF16 = 30,
};

struct GgmlTypeTraits {
  std::string_view name;  // "F16", "Q8_0", ...
  int64_t block_size;     // elements per block (1 for plain floats)
  int64_t block_bytes;    // bytes per block
  bool supported;         // this engine can dequantize / multiply it
};

// nullopt for a type number ggml does not define.
std::optional<GgmlTypeTraits> GetTypeTraits(uint32_t type);
std::string_view GgmlTypeName(GgmlType t);
// Bytes of `n` elements; n must be a multiple of the block size.
uint64_t RowBytes(GgmlType t, int64_t n);

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7) from a
// super-block's 12 scale bytes q (ggml's get_scale_min_k4).
inline void Q4_KScaleMin(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q6_K: the 6-bit code (0..63; the value is code - 32) of element x (0..31)
// of 32-value block b (0..7) of a super-block blk (block_q6_K { u8 ql[128];
// u8 qh[64]; i8 scales[16]; f16 d }): block b = 4h + c (h: half of 128)
// takes its low 4 bits from ql[64h + 32 (c % 2) + x] nibble c / 2, its high
// 2 from qh[32h + x] bits 2c.
inline int Q6_KCode(const uint8_t* blk, int b, int x) {
  const int h = b / 4, c = b % 4;
  const int lo = (blk[64 * h + 32 * (c % 2) + x] >> (4 * (c / 2))) & 0xF;
  const int hi = (blk[128 + 32 * h + x] >> (2 * c)) & 3;
  return lo | (hi << 4);
}

// dst[0..n) = dequantized src row; n is a multiple of the block size.
void DequantizeRow(GgmlType t, const void* src, float* dst, int64_t n);

}  // namespace specserve
