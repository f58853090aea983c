// The scalar model of kernels/cpu_matmul_int8.h's numerics that
// matmul_int8_test compares every int8 kernel with, bit for bit: written from
// the header's description and ggml's block layouts, not from the kernel code.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "common/fp16.h"
#include "common/tensor_types.h"
#include "common/weights.h"

namespace specserve::int8_reference {

struct RefToken {
  std::vector<int> q;    // [n]
  std::vector<float> d;  // [n / 32]
};

inline RefToken RefQuantize(const float* x, int64_t n) {
  RefToken tok;
  tok.q.assign(n, 0);
  tok.d.assign(n / 32, 0.f);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + 32 * b;
    bool finite = true;
    float amax = 0.f;
    for (int j = 0; j < 32; ++j) {
      if (!std::isfinite(xb[j])) finite = false;
      if (std::fabs(xb[j]) > amax) amax = std::fabs(xb[j]);
    }
    if (!finite) {
      tok.d[b] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    float d = amax / 127.f;
    if (d < FLT_MIN) d = 0.f;
    const float id = d == 0.f ? 0.f : 1.f / d;
    tok.d[b] = d;
    for (int j = 0; j < 32; ++j) {
      const float v = xb[j] * id;
      const float r = std::nearbyint(v);
      EXPECT_LE(std::fabs(r), 127.f);
      tok.q[32 * b + j] = static_cast<int>(r);
    }
  }
  return tok;
}

struct RefRow {
  std::vector<int> u;     // [n] unsigned codes
  int o = 0;              // offset
  std::vector<float> ws;  // [n] float scale of each value
  std::vector<float> m1;  // [n / 32] Q4_K mins
  std::vector<int> sc16;  // [n / 16] Q6_K integer scales
  std::vector<float> d256;  // [n / 256] Q6_K super-block scales
};

inline int ScaleMin(int j, const uint8_t* s, bool min) {
  if (j < 4) return s[j + (min ? 4 : 0)] & 63;
  if (!min) return (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
  return (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
}

inline float Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return F16ToF32(h);
}

inline RefRow RefDecode(GgmlType type, const uint8_t* row, int64_t n) {
  RefRow rr;
  rr.u.resize(n);
  rr.ws.resize(n);
  rr.m1.assign(n / 32, 0.f);
  rr.sc16.assign(n / 16, 0);
  rr.d256.assign(n / 256, 0.f);
  for (int64_t i = 0; i < n; ++i) {
    switch (type) {
      case GgmlType::kQ8_0: {
        const uint8_t* b = row + 34 * (i / 32);
        rr.u[i] = static_cast<int8_t>(b[2 + i % 32]) + 128;
        rr.o = 128;
        rr.ws[i] = Half(b);
        break;
      }
      case GgmlType::kQ5_0: {
        const uint8_t* b = row + 22 * (i / 32);
        const int e = static_cast<int>(i % 32);
        uint32_t qh;
        std::memcpy(&qh, b + 2, 4);
        const int nib = e < 16 ? (b[6 + e] & 0xF) : (b[6 + e - 16] >> 4);
        rr.u[i] = nib | static_cast<int>(((qh >> e) & 1) << 4);
        rr.o = 16;
        rr.ws[i] = Half(b);
        break;
      }
      case GgmlType::kQ4_K: {
        // ggml dequantize_row_q4_K: 64 values per 32 bytes of qs, low
        // nibbles first, each half with its own scale and min.
        const uint8_t* b = row + 144 * (i / 256);
        const int v = static_cast<int>(i % 256), j = v / 32, l = v % 32;
        const uint8_t q = b[16 + 32 * (j / 2) + l];
        rr.u[i] = j % 2 == 0 ? (q & 0xF) : (q >> 4);
        rr.o = 0;
        rr.ws[i] = Half(b) * static_cast<float>(ScaleMin(j, b + 4, false));
        rr.m1[i / 32] = Half(b + 2) * static_cast<float>(ScaleMin(j, b + 4, true));
        break;
      }
      case GgmlType::kQ6_K: {
        // ggml dequantize_row_q6_K: halves of 128 values; value l of row r
        // of a half from ql[l + 32 (r % 2)] nibble r / 2, qh[l] bits 2r.
        const uint8_t* b = row + 210 * (i / 256);
        const int v = static_cast<int>(i % 256), h = v / 128, r = (v % 128) / 32, l = v % 32;
        const uint8_t* ql = b + 64 * h;
        const uint8_t* qh = b + 128 + 32 * h;
        const int lo = r < 2 ? (ql[l + 32 * (r % 2)] & 0xF) : (ql[l + 32 * (r % 2)] >> 4);
        rr.u[i] = lo | (((qh[l] >> (2 * r)) & 3) << 4);
        rr.o = 32;
        rr.ws[i] = Half(b + 208) * static_cast<float>(static_cast<int8_t>(b[192 + v / 16]));
        rr.sc16[i / 16] = static_cast<int8_t>(b[192 + v / 16]);
        rr.d256[i / 256] = Half(b + 208);
        break;
      }
      default: ADD_FAILURE();
    }
  }
  return rr;
}

inline float RefDot(GgmlType type, const RefRow& w, const RefToken& x, int64_t n) {
  if (type == GgmlType::kQ4_K) {
    // One accumulator; per sub-block the exact integer dot, an fma for the
    // scale and one for the min (ms = d_x * S).
    float acc = 0.f;
    for (int64_t b = 0; b < n / 32; ++b) {
      int32_t i = 0, sum = 0;
      for (int64_t v = 32 * b; v < 32 * b + 32; ++v) {
        i += w.u[v] * x.q[v];
        sum += x.q[v];
      }
      acc = std::fma(static_cast<float>(i), w.ws[32 * b] * x.d[b], acc);
      acc = std::fma(-w.m1[b], x.d[b] * static_cast<float>(sum), acc);
    }
    return acc;
  }
  if (type == GgmlType::kQ6_K) {
    // One accumulator; per block the integer dots of its two 16-value
    // sub-blocks times their integer scales (exact), then one fma with the
    // super-block's d times the block's d_x.
    float acc = 0.f;
    for (int64_t b = 0; b < n / 32; ++b) {
      int32_t i = 0;
      for (int64_t sub = 2 * b; sub < 2 * b + 2; ++sub) {
        int32_t dot = 0;
        for (int64_t v = 16 * sub; v < 16 * sub + 16; ++v) dot += (w.u[v] - w.o) * x.q[v];
        i += w.sc16[sub] * dot;
      }
      acc = std::fma(static_cast<float>(i), w.d256[b / 8] * x.d[b], acc);
    }
    return acc;
  }
  if (type == GgmlType::kQ8_0) {
    // One accumulator; per block the exact integer dot, then one fma.
    float acc = 0.f;
    for (int64_t b = 0; b < n / 32; ++b) {
      int32_t i = 0;
      for (int64_t v = 32 * b; v < 32 * b + 32; ++v) i += (w.u[v] - w.o) * x.q[v];
      acc = std::fma(static_cast<float>(i), w.ws[32 * b] * x.d[b], acc);
    }
    return acc;
  }
  float acc[16] = {};
  const int64_t pairs = (n + 63) / 64;
  for (int64_t p = 0; p < pairs; ++p) {
    if (type == GgmlType::kQ4_K && p % 4 == 0) {
      const int64_t g = p / 4;
      for (int l = 0; l < 16; ++l) {
        float dm, ms;
        if (l < 8) {
          dm = w.ws[256 * g + 32 * l];
          ms = 0.f;
        } else {
          const int64_t blk = 8 * g + l - 8;
          int s = 0;
          for (int j = 0; j < 32; ++j) s += x.q[32 * blk + j];
          dm = w.m1[blk];
          ms = x.d[blk] * static_cast<float>(s);
        }
        acc[l] = std::fma(-dm, ms, acc[l]);
      }
    }
    for (int l = 0; l < 16; ++l) {
      const int64_t v0 = 64 * p + 4 * l;
      int32_t i = 0;
      float s = 0.f * 0.f;
      if (v0 < n) {
        for (int k = 0; k < 4; ++k) i += (w.u[v0 + k] - w.o) * x.q[v0 + k];
        s = w.ws[v0] * x.d[v0 / 32];
      }
      acc[l] = std::fma(static_cast<float>(i), s, acc[l]);
    }
  }
  float a[8], b[4];
  for (int i = 0; i < 8; ++i) a[i] = acc[i] + acc[i + 8];
  for (int i = 0; i < 4; ++i) b[i] = a[i] + a[i + 4];
  return (b[0] + b[2]) + (b[1] + b[3]);
}

// want[t * rows + r] for the first T tokens of x.
inline std::vector<float> RefMatMul(const MatrixView& w, const float* x, int64_t T) {
  std::vector<RefToken> toks;
  for (int64_t t = 0; t < T; ++t) toks.push_back(RefQuantize(x + t * w.cols, w.cols));
  std::vector<float> want(T * w.rows);
  for (int64_t r = 0; r < w.rows; ++r) {
    const RefRow rr = RefDecode(w.type, w.row(r), w.cols);
    for (int64_t t = 0; t < T; ++t) want[t * w.rows + r] = RefDot(w.type, rr, toks[t], w.cols);
  }
  return want;
}

}  // namespace specserve::int8_reference
