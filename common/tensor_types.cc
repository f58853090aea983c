#include "common/tensor_types.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/fp16.h"

namespace specserve {
namespace {

constexpr int64_t kQK = 32;     // elements per block of the 32-wide formats
constexpr int64_t kQK_K = 256;  // elements per K-quant super-block

// Every type number in ggml's `enum ggml_type` (gaps are numbers ggml retired:
// 4, 5, 31-33, 36-38). Sizes are sizeof(block_*) in ggml-common.h.
struct TypeEntry {
  uint32_t id;
  GgmlTypeTraits traits;
};
constexpr std::array<TypeEntry, 32> kTypes = {{
    {0, {"F32", 1, 4, true}},
    {1, {"F16", 1, 2, true}},
    {2, {"Q4_0", kQK, 2 + 16, false}},
    {3, {"Q4_1", kQK, 2 + 2 + 16, false}},
    {6, {"Q5_0", kQK, 2 + 4 + 16, true}},
    {7, {"Q5_1", kQK, 2 + 2 + 4 + 16, false}},
    {8, {"Q8_0", kQK, 2 + 32, true}},
    {9, {"Q8_1", kQK, 2 + 2 + 32, false}},
    {10, {"Q2_K", kQK_K, 16 + 64 + 2 + 2, false}},
    {11, {"Q3_K", kQK_K, 32 + 64 + 12 + 2, false}},
    {12, {"Q4_K", kQK_K, 2 + 2 + 12 + 128, true}},
    {13, {"Q5_K", kQK_K, 2 + 2 + 12 + 32 + 128, false}},
    {14, {"Q6_K", kQK_K, 128 + 64 + 16 + 2, true}},
    {15, {"Q8_K", kQK_K, 4 + 256 + 32, false}},
    {16, {"IQ2_XXS", kQK_K, 66, false}},
    {17, {"IQ2_XS", kQK_K, 74, false}},
    {18, {"IQ3_XXS", kQK_K, 98, false}},
    {19, {"IQ1_S", kQK_K, 50, false}},
    {20, {"IQ4_NL", kQK, 18, false}},
    {21, {"IQ3_S", kQK_K, 110, false}},
    {22, {"IQ2_S", kQK_K, 82, false}},
    {23, {"IQ4_XS", kQK_K, 136, false}},
    {24, {"I8", 1, 1, false}},
    {25, {"I16", 1, 2, false}},
    {26, {"I32", 1, 4, false}},
    {27, {"I64", 1, 8, false}},
    {28, {"F64", 1, 8, false}},
    {29, {"IQ1_M", kQK_K, 56, false}},
    {30, {"BF16", 1, 2, true}},
    {34, {"TQ1_0", kQK_K, 54, false}},
    {35, {"TQ2_0", kQK_K, 66, false}},
    {39, {"MXFP4", kQK, 17, false}},
}};

const GgmlTypeTraits* FindTraits(uint32_t type) {
  for (const TypeEntry& e : kTypes) {
    if (e.id == type) return &e.traits;
  }
  return nullptr;
}

// A caller passing an unknown type or a ragged row broke an invariant that
// the loader already checked for file data: fail loudly.
[[noreturn]] void Die(const char* what, uint32_t type, int64_t n) {
  std::fprintf(stderr, "specserve tensor_types: %s (type %u, n %lld)\n", what, type,
               static_cast<long long>(n));
  std::abort();
}

inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline float LoadHalf(const uint8_t* p) { return F16ToF32(LoadU16(p)); }

// block_q8_0: { f16 d; int8 qs[32]; }  y = d * q
void DequantQ8_0(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 34, y += kQK) {
    const float d = LoadHalf(x);
    const int8_t* qs = reinterpret_cast<const int8_t*>(x + 2);
    for (int j = 0; j < kQK; ++j) y[j] = qs[j] * d;
  }
}

// block_q5_0: { f16 d; uint8 qh[4]; uint8 qs[16]; }. Low nibbles of qs are
// elements 0..15, high nibbles 16..31; bit j of qh is element j's fifth bit.
void DequantQ5_0(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 22, y += kQK) {
    const float d = LoadHalf(x);
    uint32_t qh;
    std::memcpy(&qh, x + 2, sizeof(qh));
    const uint8_t* qs = x + 6;
    for (int j = 0; j < kQK / 2; ++j) {
      const uint8_t xh0 = ((qh >> j) << 4) & 0x10;
      const uint8_t xh1 = (qh >> (j + 12)) & 0x10;
      const int32_t x0 = ((qs[j] & 0x0f) | xh0) - 16;
      const int32_t x1 = ((qs[j] >> 4) | xh1) - 16;
      y[j] = x0 * d;
      y[j + kQK / 2] = x1 * d;
    }
  }
}

// block_q4_K: { f16 d; f16 dmin; uint8 scales[12]; uint8 qs[128]; }: eight
// sub-blocks of 32, y = d*sc*q - dmin*m; each 32 bytes of qs hold two
// sub-blocks (low nibbles first).
void DequantQ4_K(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 144) {
    const float d = LoadHalf(x);
    const float dmin = LoadHalf(x + 2);
    const uint8_t* scales = x + 4;
    const uint8_t* q = x + 16;
    int is = 0;
    for (int j = 0; j < kQK_K; j += 64, q += 32, is += 2) {
      int sc, m;
      Q4_KScaleMin(is, scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      Q4_KScaleMin(is + 1, scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xf) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    }
  }
}

// block_q6_K: { uint8 ql[128]; uint8 qh[64]; int8 scales[16]; f16 d; }:
// 6-bit values (4 low bits in ql, 2 high in qh) minus 32, sixteen sub-blocks
// of 16 each with an int8 scale. Each half of 128 interleaves four rows of 32.
void DequantQ6_K(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 210) {
    const int8_t* sc = reinterpret_cast<const int8_t*>(x + 192);
    const float d = LoadHalf(x + 208);
    for (int b = 0; b < 8; ++b, y += 32) {
      for (int l = 0; l < 32; ++l) {
        y[l] = d * sc[2 * b + l / 16] * static_cast<int8_t>(Q6_KCode(x, b, l) - 32);
      }
    }
  }
}

}  // namespace

std::optional<GgmlTypeTraits> GetTypeTraits(uint32_t type) {
  const GgmlTypeTraits* t = FindTraits(type);
  if (t == nullptr) return std::nullopt;
  return *t;
}

std::string_view GgmlTypeName(GgmlType t) {
  const GgmlTypeTraits* tr = FindTraits(static_cast<uint32_t>(t));
  return tr ? tr->name : std::string_view("unknown");
}

uint64_t RowBytes(GgmlType t, int64_t n) {
  const GgmlTypeTraits* tr = FindTraits(static_cast<uint32_t>(t));
  if (tr == nullptr) Die("RowBytes: unknown type", static_cast<uint32_t>(t), n);
  if (n < 0 || n % tr->block_size != 0) {
    Die("RowBytes: n is not a multiple of the block size", static_cast<uint32_t>(t), n);
  }
  return static_cast<uint64_t>(n / tr->block_size) * static_cast<uint64_t>(tr->block_bytes);
}

void DequantizeRow(GgmlType t, const void* src, float* dst, int64_t n) {
  const uint32_t id = static_cast<uint32_t>(t);
  const GgmlTypeTraits* tr = FindTraits(id);
  if (tr == nullptr || !tr->supported) Die("DequantizeRow: unsupported type", id, n);
  if (n < 0 || n % tr->block_size != 0) {
    Die("DequantizeRow: n is not a multiple of the block size", id, n);
  }
  const auto* x = static_cast<const uint8_t*>(src);
  const int64_t nb = n / tr->block_size;
  switch (t) {
    case GgmlType::kF32:
      std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = F16ToF32(LoadU16(x + 2 * i));
      return;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToF32(LoadU16(x + 2 * i));
      return;
    case GgmlType::kQ8_0: return DequantQ8_0(x, dst, nb);
    case GgmlType::kQ5_0: return DequantQ5_0(x, dst, nb);
    case GgmlType::kQ4_K: return DequantQ4_K(x, dst, nb);
    case GgmlType::kQ6_K: return DequantQ6_K(x, dst, nb);
    default: Die("DequantizeRow: supported type without a decoder", id, n);
  }
}

}  // namespace specserve
