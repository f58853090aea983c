// PackForInt8 and its sizes: Q8_0, Q4_K and Q6_K matrices rewritten in the
// layouts of kernels/cpu_matmul_packed.h (16 rows interleaved), once at load.
// Portable code; the kernels that read these layouts are
// cpu_matmul_packed.cc (AVX-512 VNNI) and cpu_matmul_packed_avx2.cc.
#include <cstring>

#include "common/check.h"
#include "common/fp16.h"
#include "kernels/cpu_matmul_int8_record.h"
#include "kernels/cpu_matmul_packed.h"

namespace specserve::cpu {
namespace {

int64_t Groups(int64_t rows) { return (rows + kPackedRows - 1) / kPackedRows; }

// For each group of 16 rows and each block of `cols` columns (`src_bytes` in
// the file, `packed_bytes` packed): dst, zeroed, then fill(dst, blk, l) for
// each row l of the group that exists (blk: that row's block in the file).
// Rows past w.rows stay zero (the kernels compute them and store nothing).
template <class Fill>
void ForEachBlock(const MatrixView& w, int64_t cols, int64_t src_bytes, int64_t packed_bytes, uint8_t* out,
                  Fill fill) {
  const int64_t nb = w.cols / cols;
  for (int64_t g = 0; g < Groups(w.rows); ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* dst = out + (g * nb + b) * packed_bytes;
      std::memset(dst, 0, packed_bytes);
      for (int64_t l = 0; l < kPackedRows && g * kPackedRows + l < w.rows; ++l) {
        fill(dst, w.row(g * kPackedRows + l) + src_bytes * b, l);
      }
    }
  }
}

void PackQ8_0(const MatrixView& w, uint8_t* out) {
  // block_q8_0 { f16 d; i8 qs[32] }
  ForEachBlock(w, 32, 34, kQ8_0PackedBytes, out, [](uint8_t* dst, const uint8_t* blk, int64_t l) {
    std::memcpy(dst + 2 * l, blk, 2);
    for (int k = 0; k < 8; ++k) {
      for (int j = 0; j < 4; ++j) dst[32 + 64 * k + 4 * l + j] = blk[2 + 4 * k + j] ^ 0x80;
    }
  });
}

void PackQ4_K(const MatrixView& w, uint8_t* out) {
  ForEachBlock(w, 256, 144, kQ4_KPackedBytes, out, [](uint8_t* dst, const uint8_t* blk, int64_t l) {
    // block_q4_K { f16 d, dmin; u8 scales[12]; u8 qs[128] }: qs[32p + x]
    // holds value 64p + x (low nibble) and 64p + 32 + x (high nibble).
    std::memcpy(dst + 2 * l, blk, 2);
    std::memcpy(dst + 32 + 2 * l, blk + 2, 2);
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      Q4_KScaleMin(j, blk + 4, &sc, &m);
      dst[64 + 16 * j + l] = static_cast<uint8_t>(sc);
      dst[192 + 16 * j + l] = static_cast<uint8_t>(m);
    }
    for (int p = 0; p < 4; ++p) {
      for (int k = 0; k < 8; ++k) {
        for (int j = 0; j < 4; ++j) dst[320 + 512 * p + 64 * k + 4 * l + j] = blk[16 + 32 * p + 4 * k + j];
      }
    }
  });
}

void PackQ6_K(const MatrixView& w, uint8_t* out) {
  ForEachBlock(w, 256, 210, kQ6_KPackedBytes, out, [](uint8_t* dst, const uint8_t* blk, int64_t l) {
    // block_q6_K { u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d }
    const float d = F16ToF32(int8_record::U16(blk + 208));
    std::memcpy(dst + 4 * l, &d, 4);
    for (int j = 0; j < 16; ++j) dst[64 + 16 * j + l] = blk[192 + j];
    for (int b = 0; b < 8; ++b) {
      for (int x = 0; x < 32; ++x) {
        // Code m = 4l + x % 4 of chunk k = x / 4: bits 6 (m % 8) of the
        // 48-bit little-endian word at byte 6 (m / 8) of the chunk.
        const int m = 4 * static_cast<int>(l) + x % 4, bit = 6 * (m % 8);
        uint8_t* word = dst + 320 + 384 * b + 48 * (x / 4) + 6 * (m / 8);
        const int u = Q6_KCode(blk, b, x);
        word[bit / 8] |= static_cast<uint8_t>(u << (bit % 8));
        if (bit % 8 > 2) word[bit / 8 + 1] |= static_cast<uint8_t>(u >> (8 - bit % 8));
      }
    }
  });
}

}  // namespace

bool PackableForInt8(const MatrixView& w) {
  switch (w.type) {
    case GgmlType::kQ8_0: return w.cols % 32 == 0;
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K: return w.cols % 256 == 0;
    default: return false;
  }
}

int64_t PackedBytes(const MatrixView& w) {
  SPECSERVE_CHECK(PackableForInt8(w));
  switch (w.type) {
    case GgmlType::kQ8_0: return Groups(w.rows) * (w.cols / 32) * kQ8_0PackedBytes;
    case GgmlType::kQ4_K: return Groups(w.rows) * (w.cols / 256) * kQ4_KPackedBytes;
    default: return Groups(w.rows) * (w.cols / 256) * kQ6_KPackedBytes;
  }
}

void PackForInt8(const MatrixView& w, uint8_t* out) {
  SPECSERVE_CHECK(PackableForInt8(w));
  switch (w.type) {
    case GgmlType::kQ8_0: return PackQ8_0(w, out);
    case GgmlType::kQ4_K: return PackQ4_K(w, out);
    default: return PackQ6_K(w, out);
  }
}

}  // namespace specserve::cpu
