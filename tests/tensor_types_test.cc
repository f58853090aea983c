// Tensor element types: traits, half/bfloat16 conversion, and row
// dequantisation, checked against per-element decoders written from the
// ggml-common.h layouts and against ggml's own output (golden_quant.json).
#include "common/tensor_types.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/fp16.h"
#include "common/gguf.h"
#include "gtest/gtest.h"
#include "tests/test_paths.h"

namespace specserve {
namespace {

TEST(TypeTraits, KnownTypes) {
  struct Want { uint32_t id; const char* name; int64_t block, bytes; bool supported; };
  const Want want[] = {
      {0, "F32", 1, 4, true},       {1, "F16", 1, 2, true},       {30, "BF16", 1, 2, true},
      {8, "Q8_0", 32, 34, true},    {6, "Q5_0", 32, 22, true},    {12, "Q4_K", 256, 144, true},
      {14, "Q6_K", 256, 210, true}, {2, "Q4_0", 32, 18, false},   {3, "Q4_1", 32, 20, false},
      {7, "Q5_1", 32, 24, false},   {9, "Q8_1", 32, 36, false},   {10, "Q2_K", 256, 84, false},
      {11, "Q3_K", 256, 110, false}, {13, "Q5_K", 256, 176, false}, {15, "Q8_K", 256, 292, false},
  };
  for (const Want& w : want) {
    auto t = GetTypeTraits(w.id);
    ASSERT_TRUE(t.has_value()) << w.name;
    EXPECT_EQ(t->name, w.name);
    EXPECT_EQ(t->block_size, w.block) << w.name;
    EXPECT_EQ(t->block_bytes, w.bytes) << w.name;
    EXPECT_EQ(t->supported, w.supported) << w.name;
    EXPECT_EQ(GgmlTypeName(static_cast<GgmlType>(w.id)), w.name);
  }
  for (uint32_t retired : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 1000u}) {
    EXPECT_FALSE(GetTypeTraits(retired).has_value()) << retired;
  }
  EXPECT_EQ(GgmlTypeName(static_cast<GgmlType>(77)), "unknown");
  EXPECT_EQ(RowBytes(GgmlType::kQ4_K, 512), 288u);
  EXPECT_EQ(RowBytes(GgmlType::kQ8_0, 288), 9u * 34u);
  EXPECT_EQ(RowBytes(GgmlType::kF16, 288), 576u);
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Fp16, HalfToFloatAllValues) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = F16ToF32(static_cast<uint16_t>(h));
    const float p = fp16_internal::F16ToF32Portable(static_cast<uint16_t>(h));
    if (std::isnan(a)) {
      EXPECT_TRUE(std::isnan(p)) << h;
      continue;
    }
    ASSERT_EQ(Bits(a), Bits(p)) << h;
    // Every finite half survives the round trip exactly.
    ASSERT_EQ(F32ToF16(a), h) << h;
    ASSERT_EQ(fp16_internal::F32ToF16Portable(a), h) << h;
  }
  EXPECT_EQ(F16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(F16ToF32(0x7bff), 65504.0f);
}

TEST(Fp16, FloatToHalfRoundsToNearestEven) {
  EXPECT_EQ(F32ToF16(65519.0f), 0x7bff);  // below the rounding boundary
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00);  // ties to even: infinity
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie, even stays
  EXPECT_EQ(F32ToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie, rounds up
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -25)), 0x0000);             // tie to zero
  EXPECT_EQ(F32ToF16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(F32ToF16(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(std::nanf("")))));
  // The portable path against the hardware one (same as itself without F16C)
  // on every class of float: random bit patterns plus halfway points.
  std::mt19937 rng(7);
  for (int i = 0; i < 1000000; ++i) {
    const float f = FromBits(rng());
    const uint16_t a = F32ToF16(f), p = fp16_internal::F32ToF16Portable(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(F16ToF32(p)));
      continue;
    }
    ASSERT_EQ(a, p) << std::hex << Bits(f);
  }
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const float lo = F16ToF32(static_cast<uint16_t>(h));
    const float hi = F16ToF32(static_cast<uint16_t>(h + 1));
    const float mid = lo + (hi - lo) / 2;  // exact in float
    ASSERT_EQ(F32ToF16(mid), fp16_internal::F32ToF16Portable(mid)) << h;
    ASSERT_EQ(F32ToF16(mid), (h & 1) ? h + 1 : h) << h;
  }
}

TEST(Bf16, ConversionMatchesGgml) {
  EXPECT_EQ(F32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Bf16ToF32(0x3f80), 1.0f);
  EXPECT_EQ(F32ToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie, even stays
  EXPECT_EQ(F32ToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie, rounds up
  EXPECT_EQ(F32ToBf16(-2.5f), 0xc020);
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(FromBits(0x7f800001)))));  // payload in low bits
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = Bf16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(F32ToBf16(f), h);
  }
}

// Random blocks whose f16 fields hold small finite values.
std::vector<uint8_t> RandomBlocks(GgmlType t, int nblocks, std::vector<int> half_offsets,
                                  uint32_t seed) {
  const auto tr = *GetTypeTraits(static_cast<uint32_t>(t));
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(nblocks * tr.block_bytes);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (int i = 0; i < nblocks; ++i) {
    for (int off : half_offsets) {
      const uint16_t h = F32ToF16(scale(rng));
      std::memcpy(&b[i * tr.block_bytes + off], &h, 2);
    }
  }
  return b;
}

float Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return F16ToF32(h);
}

// Element e of one block, decoded directly from the ggml-common.h layout.
float RefQ8_0(const uint8_t* b, int e) { return static_cast<int8_t>(b[2 + e]) * Half(b); }
float RefQ5_0(const uint8_t* b, int e) {
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  const uint8_t* qs = b + 6;
  const int lo = e < 16 ? (qs[e] & 0xf) : (qs[e - 16] >> 4);
  const int hi = static_cast<int>((qh >> e) & 1);
  return ((lo | (hi << 4)) - 16) * Half(b);
}
float RefQ4_K(const uint8_t* b, int e) {
  const uint8_t* sc = b + 4;
  const int s = e / 32;  // sub-block of 32; its 6-bit scale and min
  const int scale = s < 4 ? sc[s] & 63 : (sc[s + 4] & 0xf) | ((sc[s - 4] >> 6) << 4);
  const int min = s < 4 ? sc[s + 4] & 63 : (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
  const uint8_t q = b[16 + (e / 64) * 32 + e % 32];
  const int v = (e % 64) < 32 ? q & 0xf : q >> 4;
  return Half(b) * scale * v - Half(b + 2) * min;
}
float RefQ6_K(const uint8_t* b, int e) {
  const int h = e / 128, k = (e % 128) / 32, l = e % 32;
  const uint8_t ql = b[h * 64 + l + (k & 1) * 32];
  const int lo = k < 2 ? ql & 0xf : ql >> 4;
  const int hi = (b[128 + h * 32 + l] >> (2 * k)) & 3;
  const int8_t scale = static_cast<int8_t>(b[192 + h * 8 + l / 16 + 2 * k]);
  return Half(b + 208) * scale * ((lo | (hi << 4)) - 32);
}

struct BlockCase {
  GgmlType type;
  std::vector<int> halves;  // byte offsets of f16 fields in a block
  float (*ref)(const uint8_t*, int);
};

TEST(Dequantize, BlocksMatchLayoutReference) {
  const BlockCase cases[] = {
      {GgmlType::kQ8_0, {0}, RefQ8_0},
      {GgmlType::kQ5_0, {0}, RefQ5_0},
      {GgmlType::kQ4_K, {0, 2}, RefQ4_K},
      {GgmlType::kQ6_K, {208}, RefQ6_K},
  };
  for (const BlockCase& c : cases) {
    const auto tr = *GetTypeTraits(static_cast<uint32_t>(c.type));
    const int nb = 3;
    auto blocks = RandomBlocks(c.type, nb, c.halves, 42 + static_cast<uint32_t>(c.type));
    std::vector<float> out(nb * tr.block_size);
    DequantizeRow(c.type, blocks.data(), out.data(), nb * tr.block_size);
    for (int i = 0; i < nb; ++i) {
      for (int e = 0; e < tr.block_size; ++e) {
        const float want = c.ref(blocks.data() + i * tr.block_bytes, e);
        ASSERT_NEAR(out[i * tr.block_size + e], want, 1e-6f * std::fabs(want) + 1e-12f)
            << tr.name << " block " << i << " elem " << e;
      }
    }
  }
}

TEST(Dequantize, PlainFloats) {
  const float f32[3] = {1.5f, -2.0f, 0.0f};
  float out[3];
  DequantizeRow(GgmlType::kF32, f32, out, 3);
  EXPECT_EQ(std::memcmp(f32, out, sizeof(f32)), 0);
  const uint16_t f16[2] = {F32ToF16(0.25f), F32ToF16(-3.0f)};
  DequantizeRow(GgmlType::kF16, f16, out, 2);
  EXPECT_EQ(out[0], 0.25f);
  EXPECT_EQ(out[1], -3.0f);
  const uint16_t bf[2] = {F32ToBf16(0.5f), F32ToBf16(-6.0f)};
  DequantizeRow(GgmlType::kBF16, bf, out, 2);
  EXPECT_EQ(out[0], 0.5f);
  EXPECT_EQ(out[1], -6.0f);
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// golden_quant.json: for each variant file, the first 64 values of the middle
// row of every tensor as ggml dequantizes them.
TEST(Dequantize, MatchesGgmlOnQuantizedModels) {
  const std::string golden = testing::GoldenPath("golden_quant.json");
  if (golden.empty()) SPECSERVE_MISSING_INPUT("../shared/golden");
  std::ifstream in(golden);
  const nlohmann::json j = nlohmann::json::parse(in);
  int files = 0, samples = 0;
  for (const auto& [file, entry] : j.at("files").items()) {
    const std::string path = testing::SharedPath("models/variants/" + file);
    if (path.empty()) continue;
    auto f = GgufFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status();
    ++files;
    for (const auto& s : entry.at("dequant_samples")) {
      const std::string name = s.at("tensor");
      SCOPED_TRACE(file + " " + name);
      const GgufTensor* t = (*f)->FindTensor(name);
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(Lower(std::string(GgmlTypeName(t->type))), Lower(s.at("type")));
      const auto ne = s.at("ne").get<std::vector<int64_t>>();
      ASSERT_EQ(t->row_length(), ne.at(0));
      ASSERT_EQ(t->nrows(), ne.size() > 1 ? ne[1] : 1);
      const int64_t row = s.at("row");
      ASSERT_LT(row, t->nrows());
      ASSERT_TRUE(GetTypeTraits(static_cast<uint32_t>(t->type))->supported);
      std::vector<float> out(t->row_length());
      DequantizeRow(t->type, t->row(row), out.data(), t->row_length());
      const auto want = s.at("values").get<std::vector<double>>();
      ASSERT_LE(want.size(), out.size());
      for (size_t i = 0; i < want.size(); ++i) {
        const double got = out[i];
        if (got == want[i]) continue;
        ASSERT_LE(std::fabs(got - want[i]), 1e-6 * std::fabs(want[i]))
            << "element " << i << ": got " << got << " want " << want[i];
      }
      ++samples;
    }
  }
  if (files == 0) SPECSERVE_MISSING_INPUT("../shared/models/variants");
  EXPECT_GT(samples, 100);
}

}  // namespace
}  // namespace specserve
