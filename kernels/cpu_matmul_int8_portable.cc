// The int8 matrix product's contract in portable scalar code (any x86-64-v3
// CPU). It is the reference that matmul_int8_test compares the VNNI tiles of
// cpu_matmul_int8.cc with, bit for bit.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/check.h"
#include "common/fp16.h"
#include "kernels/cpu_matmul_int8.h"
#include "kernels/cpu_matmul_int8_record.h"

namespace specserve::cpu {
namespace {

using namespace int8_record;  // NOLINT: the shared record helpers

// q[0..32) and the returned d for the block x[0..32).
float QuantizeBlockScalar(const float* x, int8_t* q) {
  float amax = 0.0f;
  bool finite = true;
  for (int j = 0; j < kBlock; ++j) {
    finite = finite && std::isfinite(x[j]);
    amax = std::max(amax, std::fabs(x[j]));
  }
  if (!finite) {
    std::memset(q, 0, kBlock);
    return std::numeric_limits<float>::quiet_NaN();
  }
  float d = amax / 127.0f;
  if (d < FLT_MIN) d = 0.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kBlock; ++j) q[j] = static_cast<int8_t>(static_cast<int>(std::nearbyint(x[j] * id)));
  return d;
}

// A row's codes u and per-lane scales ws (16 per pair), Q5_0.
struct RowCodes {
  std::vector<uint8_t> u;
  std::vector<float> ws;
};

void DecodeRowCodes(GgmlType type, const uint8_t* row, int64_t n, RowCodes& rc) {
  const int64_t pairs = (n + kPair - 1) / kPair;
  rc.u.assign(pairs * kPair, 0);
  rc.ws.assign(pairs * 16, 0.0f);
  auto set_ws = [&](int64_t v0, int64_t count, float s) {
    for (int64_t l = v0 / 4; l < (v0 + count) / 4; ++l) rc.ws[l] = s;
  };
  switch (type) {
    case GgmlType::kQ5_0:
      for (int64_t c = 0; c < n / kBlock; ++c) {
        const uint8_t* b = row + 22 * c;
        uint32_t qh;
        std::memcpy(&qh, b + 2, 4);
        for (int j = 0; j < 32; ++j) {
          rc.u[32 * c + j] = static_cast<uint8_t>(((b[6 + j % 16] >> (4 * (j / 16))) & 0xF) | (((qh >> j) & 1) << 4));
        }
        set_ws(32 * c, 32, F16ToF32(U16(b)));
      }
      break;
    default: SPECSERVE_CHECK(false && "DecodeRowCodes: unsupported type");
  }
}

inline float ReduceLanes(const float* acc) {
  float a[8], b[4];
  for (int i = 0; i < 8; ++i) a[i] = acc[i] + acc[i + 8];
  for (int i = 0; i < 4; ++i) b[i] = a[i] + a[i + 4];
  return (b[0] + b[2]) + (b[1] + b[3]);
}

}  // namespace

void QuantizeActivationsInt8Portable(GgmlType type, const float* x, int64_t T, int64_t n, Int8Activations& out) {
  Resize(type, T, n, out);
  const int offset = Offset(type);
  const int64_t chunks = n / kBlock;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t p = 0; p < out.pairs; ++p) {
      Int8Pair& rec = out.pair[t * out.pairs + p];
      for (int h = 0; h < 2; ++h) {
        const int64_t c = 2 * p + h;
        if (c >= chunks) {
          ZeroBlock(rec, h);
          continue;
        }
        const float d = QuantizeBlockScalar(x + t * n + c * kBlock, rec.q + 32 * h);
        SetMs(out, t, c, d, FinishBlock(rec, h, d, offset));
      }
    }
  }
  SumBlockBiases(out);
}

// The Q8_0 contract (kernels/cpu_matmul_int8.h): per block, the exact integer
// dot, then one fma into one accumulator per (row, token).
void MatMulQ8_0RowsPortable(const MatrixView& w, const Int8Activations& a, float* y, int64_t r0, int64_t r1) {
  const int64_t nb = w.cols / kBlock;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    for (int64_t t = 0; t < a.T; ++t) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = row + 34 * b;  // block_q8_0 { f16 d; i8 qs[32] }
        const Int8Pair& x = a.token(t)[b / 2];
        const int h = static_cast<int>(b % 2);
        int32_t i = a.block_bias[t * a.blocks + b];
        for (int j = 0; j < kBlock; ++j) i += static_cast<int32_t>(blk[2 + j] ^ 0x80) * x.q[32 * h + j];
        const float s = F16ToF32(U16(blk)) * x.d[8 * h];
        acc = std::fma(static_cast<float>(i), s, acc);
      }
      y[t * w.rows + r] = acc;
    }
  }
}

// The Q4_K contract: per sub-block of 32 values, the exact integer dot of the
// nibbles, then an fma for the scale and one for the min.
void MatMulQ4_KRowsPortable(const MatrixView& w, const Int8Activations& a, float* y, int64_t r0, int64_t r1) {
  const int64_t ns = w.cols / 256;
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t t = 0; t < a.T; ++t) {
      float acc = 0.0f;
      for (int64_t s = 0; s < ns; ++s) {
        const uint8_t* blk = w.row(r) + 144 * s;  // block_q4_K { f16 d, dmin; u8 scales[12]; u8 qs[128] }
        const float d = F16ToF32(U16(blk)), dmin = F16ToF32(U16(blk + 2));
        for (int j = 0; j < 8; ++j) {
          int sc, m;
          Q4_KScaleMin(j, blk + 4, &sc, &m);
          const Int8Pair& x = a.token(t)[4 * s + j / 2];
          const int h = j % 2;
          int32_t i = 0;
          for (int l = 0; l < 32; ++l) i += ((blk[16 + 32 * (j / 2) + l] >> (4 * h)) & 0xF) * x.q[32 * h + l];
          const float ws = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
          acc = std::fma(static_cast<float>(i), ws * x.d[8 * h], acc);
          acc = std::fma(-m1, a.token_ms(t)[s].v[8 + j], acc);
        }
      }
      y[t * w.rows + r] = acc;
    }
  }
}

// The Q6_K contract: per block of 32 values, the exact integer dots of its two
// 16-value sub-blocks (from the bias -32 * S16) times their int8 scales,
// summed, then one fma.
void MatMulQ6_KRowsPortable(const MatrixView& w, const Int8Activations& a, float* y, int64_t r0, int64_t r1) {
  const int64_t ns = w.cols / 256;
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t t = 0; t < a.T; ++t) {
      const int32_t* bias = a.sub_bias.data() + t * a.subs;
      float acc = 0.0f;
      for (int64_t s = 0; s < ns; ++s) {
        // block_q6_K { u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d }
        const uint8_t* blk = w.row(r) + 210 * s;
        const float d = F16ToF32(U16(blk + 208));
        for (int b = 0; b < 8; ++b) {
          const Int8Pair& x = a.token(t)[4 * s + b / 2];
          int32_t i = 0;
          for (int j = 0; j < 2; ++j) {
            int32_t ij = bias[16 * s + 2 * b + j];
            for (int v = 16 * j; v < 16 * j + 16; ++v) ij += Q6_KCode(blk, b, v) * x.q[32 * (b % 2) + v];
            i += static_cast<int32_t>(static_cast<int8_t>(blk[192 + 2 * b + j])) * ij;
          }
          acc = std::fma(static_cast<float>(i), d * x.d[8 * (b % 2)], acc);
        }
      }
      y[t * w.rows + r] = acc;
    }
  }
}

void MatMulInt8RowsPortable(const MatrixView& w, const Int8Activations& a, float* y, int64_t r0, int64_t r1) {
  SPECSERVE_CHECK(a.type == w.type && a.n == w.cols);
  if (w.type == GgmlType::kQ8_0) return MatMulQ8_0RowsPortable(w, a, y, r0, r1);
  if (w.type == GgmlType::kQ4_K) return MatMulQ4_KRowsPortable(w, a, y, r0, r1);
  if (w.type == GgmlType::kQ6_K) return MatMulQ6_KRowsPortable(w, a, y, r0, r1);
  thread_local RowCodes rc;
  for (int64_t r = r0; r < r1; ++r) {
    DecodeRowCodes(w.type, w.row(r), w.cols, rc);
    for (int64_t t = 0; t < a.T; ++t) {
      const Int8Pair* xp = a.token(t);
      float acc[16] = {};
      for (int64_t p = 0; p < a.pairs; ++p) {
        const Int8Pair& x = xp[p];
        const uint8_t* u = rc.u.data() + kPair * p;
        for (int l = 0; l < 16; ++l) {
          int32_t i = x.bias[l];
          for (int k = 0; k < 4; ++k) i += static_cast<int32_t>(u[4 * l + k]) * x.q[4 * l + k];
          const float s = rc.ws[16 * p + l] * x.d[l];
          acc[l] = std::fma(static_cast<float>(i), s, acc[l]);
        }
      }
      y[t * w.rows + r] = ReduceLanes(acc);
    }
  }
}

}  // namespace specserve::cpu
