#include "common/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/check.h"
#include "common/fp16.h"

namespace specserve {
namespace {

constexpr int kQK = 32;     // elements per block of the 32-wide formats
constexpr int kQK_K = 256;  // elements per K-quant super-block
constexpr float kGroupMaxEps = 1e-15f;  // ggml's GROUP_MAX_EPS: an all-zero group

// Round to nearest, ties to even (ggml's nearest_int).
inline int NearestInt(float v) { return static_cast<int>(std::nearbyint(v)); }

inline void StoreHalf(uint8_t* p, float v) {
  const uint16_t h = F32ToF16(v);
  std::memcpy(p, &h, 2);
}
inline float HalfRound(float v) { return F16ToF32(F32ToF16(v)); }

// block_q8_0: { f16 d; int8 qs[32]; }
void QuantQ8_0(const float* x, uint8_t* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK, y += 34) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    StoreHalf(y, d);
    auto* qs = reinterpret_cast<int8_t*>(y + 2);
    for (int j = 0; j < kQK; ++j) qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

// block_q5_0: { f16 d; uint8 qh[4]; uint8 qs[16]; }: low nibbles elements
// 0..15, high nibbles 16..31, bit j of qh the fifth bit of element j.
void QuantQ5_0(const float* x, uint8_t* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK, y += 22) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    StoreHalf(y, d);
    uint32_t qh = 0;
    uint8_t* qs = y + 6;
    for (int j = 0; j < kQK / 2; ++j) {
      const auto xi0 = static_cast<uint8_t>(std::min(31, int{static_cast<int8_t>(x[j] * id + 16.5f)}));
      const auto xi1 = static_cast<uint8_t>(std::min(31, int{static_cast<int8_t>(x[j + kQK / 2] * id + 16.5f)}));
      qs[j] = static_cast<uint8_t>((xi0 & 0x0f) | ((xi1 & 0x0f) << 4));
      qh |= ((xi0 & 0x10u) >> 4) << j;
      qh |= ((xi1 & 0x10u) >> 4) << (j + kQK / 2);
    }
    std::memcpy(y + 2, &qh, 4);
  }
}

// ggml's make_qkx2_quants: L[i] in [0, nmax] and (scale, min) minimising the
// weighted squared error of scale * L + min against x, searched over nstep
// candidate scales around nmax / (max - min). Returns the scale; *the_min is
// -min (>= 0).
float MakeQkx2Quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                     uint8_t* Laux, float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0];
  float sum_w = weights[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(L, L + n, 0);
    *the_min = -min;
    return 0.0f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = NearestInt(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::clamp(l, 0, nmax));
    const float diff = scale * L[i] + min - x[i];
    best_error += weights[i] * diff * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(NearestInt(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        const float diff = this_scale * Laux[i] + this_min - x[i];
        cur_error += weights[i] * diff * diff;
      }
      if (cur_error < best_error) {
        std::copy(Laux, Laux + n, L);
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// block_q4_K: { f16 d; f16 dmin; uint8 scales[12]; uint8 qs[128]; }: eight
// sub-blocks of 32, x ~ d * sc * q - dmin * m with 6-bit sc, m packed as
// Q4_KScaleMin (common/tensor_types.h) unpacks them.
void QuantQ4_K(const float* x, uint8_t* y, int64_t nb) {
  uint8_t L[kQK_K], Laux[32];
  float weights[32], mins[kQK_K / 32], scales[kQK_K / 32];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K, y += 144) {
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < kQK_K / 32; ++j) {
      float sum_x2 = 0;
      for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
      const float av_x = std::sqrt(sum_x2 / 32);
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
      scales[j] = MakeQkx2Quants(32, 15, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -1.0f, 0.1f, 20);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    uint8_t* sc = y + 4;
    std::memset(sc, 0, 12);
    for (int j = 0; j < kQK_K / 32; ++j) {
      const auto ls = static_cast<uint8_t>(std::min(63, NearestInt(inv_scale * scales[j])));
      const auto lm = static_cast<uint8_t>(std::min(63, NearestInt(inv_min * mins[j])));
      if (j < 4) {
        sc[j] = ls;
        sc[j + 4] = lm;
      } else {
        sc[j + 4] = static_cast<uint8_t>((ls & 0xf) | ((lm & 0xf) << 4));
        sc[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
        sc[j] |= static_cast<uint8_t>((lm >> 4) << 6);
      }
    }
    StoreHalf(y, max_scale / 63.0f);
    StoreHalf(y + 2, max_min / 63.0f);
    const float d_all = HalfRound(max_scale / 63.0f), dmin_all = HalfRound(max_min / 63.0f);
    for (int j = 0; j < kQK_K / 32; ++j) {
      uint8_t s, m;
      if (j < 4) {
        s = sc[j] & 63;
        m = sc[j + 4] & 63;
      } else {
        s = (sc[j + 4] & 0xf) | ((sc[j - 4] >> 6) << 4);
        m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
      }
      const float d = d_all * s;
      if (d == 0.0f) continue;
      const float dm = dmin_all * m;
      for (int ii = 0; ii < 32; ++ii) {
        L[32 * j + ii] = static_cast<uint8_t>(std::clamp(NearestInt((x[32 * j + ii] + dm) / d), 0, 15));
      }
    }
    uint8_t* q = y + 16;
    for (int j = 0; j < kQK_K; j += 64, q += 32) {
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    }
  }
}

// ggml's make_qx_quants with rmse_type 1 (weights x^2): L[i] - nmax in
// [-nmax, nmax - 1] and the scale minimising the weighted error, searched over
// 18 candidate scales around -nmax / max.
float MakeQxQuants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, 0);
    return 0.0f;
  }
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        L[i] = static_cast<int8_t>(nmax + std::clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// block_q6_K: { uint8 ql[128]; uint8 qh[64]; int8 scales[16]; f16 d; }:
// x ~ d * scales[j] * (q - 32) with 6-bit q, interleaved as DequantQ6_K reads.
void QuantQ6_K(const float* x, uint8_t* y, int64_t nb) {
  int8_t L[kQK_K];
  float scales[kQK_K / 16];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K, y += 210) {
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      scales[ib] = MakeQxQuants(16, 32, x + 16 * ib, L + 16 * ib);
      if (std::fabs(scales[ib]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[ib]);
        max_scale = scales[ib];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(y, 0, 210);
      continue;
    }
    const float iscale = -128.0f / max_scale;
    StoreHalf(y + 208, 1 / iscale);
    const float d_all = HalfRound(1 / iscale);
    auto* sc = reinterpret_cast<int8_t*>(y + 192);
    for (int ib = 0; ib < kQK_K / 16; ++ib) sc[ib] = static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[ib])));
    for (int j = 0; j < kQK_K / 16; ++j) {
      const float d = d_all * sc[j];
      if (d == 0.0f) continue;
      for (int ii = 0; ii < 16; ++ii) {
        L[16 * j + ii] = static_cast<int8_t>(std::clamp(NearestInt(x[16 * j + ii] / d), -32, 31) + 32);
      }
    }
    uint8_t* ql = y;
    uint8_t* qh = y + 128;
    for (int j = 0; j < kQK_K; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t q1 = L[j + l] & 0xf, q2 = L[j + l + 32] & 0xf;
        const uint8_t q3 = L[j + l + 64] & 0xf, q4 = L[j + l + 96] & 0xf;
        ql[l] = static_cast<uint8_t>(q1 | (q3 << 4));
        ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
        qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                     ((L[j + l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace

bool CanQuantize(GgmlType t) {
  switch (t) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ8_0:
    case GgmlType::kQ5_0:
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K: return true;
    default: return false;
  }
}

void QuantizeRow(GgmlType t, const float* src, void* dst, int64_t n) {
  SPECSERVE_CHECK(CanQuantize(t));
  const auto traits = GetTypeTraits(static_cast<uint32_t>(t));
  SPECSERVE_CHECK(n >= 0 && n % traits->block_size == 0);
  auto* y = static_cast<uint8_t*>(dst);
  const int64_t nb = n / traits->block_size;
  switch (t) {
    case GgmlType::kF32: std::memcpy(y, src, static_cast<size_t>(n) * 4); return;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = F32ToF16(src[i]);
        std::memcpy(y + 2 * i, &h, 2);
      }
      return;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = F32ToBf16(src[i]);
        std::memcpy(y + 2 * i, &h, 2);
      }
      return;
    case GgmlType::kQ8_0: return QuantQ8_0(src, y, nb);
    case GgmlType::kQ5_0: return QuantQ5_0(src, y, nb);
    case GgmlType::kQ4_K: return QuantQ4_K(src, y, nb);
    case GgmlType::kQ6_K: return QuantQ6_K(src, y, nb);
    default: SPECSERVE_CHECK(false);
  }
}

}  // namespace specserve
