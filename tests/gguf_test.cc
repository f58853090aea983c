// GGUF loader: valid files round-trip, every class of malformed file yields a
// status that names the problem, random corruption never crashes, and the
// bundled models read as documented in ../shared/models/README.md.
#include "common/gguf.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/fp16.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/gguf_writer.h"
#include "tests/test_paths.h"

namespace specserve {
namespace {

using ::testing::HasSubstr;
using ::testing::AllOf;
using testing::ByteWriter;
using testing::GgufWriter;
using testing::TensorSpec;
namespace gt = testing::gguf_type;

class GgufTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/gguf_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    ::unlink(Path().c_str());
    ::rmdir(dir_.c_str());
  }
  std::string Path() const { return dir_ + "/f.gguf"; }
  // Every case reuses one file name: the fuzz test writes thousands.
  std::string Write(const std::string& bytes) {
    EXPECT_TRUE(testing::WriteFile(Path(), bytes));
    return Path();
  }
  absl::StatusOr<std::unique_ptr<GgufFile>> OpenBytes(const std::string& bytes) {
    return GgufFile::Open(Write(bytes));
  }
  // Expects `bytes` to fail to open with `code` and every substring in `subs`.
  void ExpectError(const std::string& bytes, absl::StatusCode code,
                   const std::vector<std::string>& subs) {
    auto f = OpenBytes(bytes);
    ASSERT_FALSE(f.ok()) << "opened a malformed file";
    EXPECT_EQ(f.status().code(), code) << f.status();
    for (const auto& s : subs) EXPECT_THAT(std::string(f.status().message()), HasSubstr(s));
  }
  void ExpectInvalid(const std::string& bytes, const std::vector<std::string>& subs) {
    ExpectError(bytes, absl::StatusCode::kInvalidArgument, subs);
  }

  std::string dir_;
};

std::vector<float> Iota(int n, float scale) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = i * scale;
  return v;
}

// A small file using every value type, arrays, a custom alignment and one
// tensor of each supported plain type plus a Q8_0 one.
GgufWriter ValidWriter() {
  GgufWriter w;
  w.String("general.architecture", "llama").Alignment(64);
  w.U8("t.u8", 200).I8("t.i8", -5).U16("t.u16", 60000).I16("t.i16", -300);
  w.U32("t.u32", 4000000000u).I32("t.i32", -7).U64("t.u64", 1ull << 40).I64("t.i64", -(1ll << 40));
  w.F32("t.f32", 0.5f).F64("t.f64", 0.25).Bool("t.bool", true);
  w.StringArray("t.strings", {"<unk>", "a b", ""});
  w.I32Array("t.ints", {1, -2, 3});
  w.F32Array("t.floats", {1.5f, -2.5f});
  w.RawArray("t.bools", gt::kBool, 2, std::string("\x01\x00", 2));
  w.F32Tensor("norm.weight", {4}, {1, 2, 3, 4});
  w.F32Tensor("mat.weight", {4, 3}, Iota(12, 0.5f));
  ByteWriter f16;
  for (int i = 0; i < 16; ++i) f16.U16(F32ToF16(i * 0.25f));
  w.Tensor({"half.weight", {8, 2}, 1, f16.bytes(), std::nullopt});
  ByteWriter q8;  // one Q8_0 block: d = 0.5, q = -16..15
  q8.U16(F32ToF16(0.5f));
  for (int i = 0; i < 32; ++i) q8.Scalar<int8_t>(static_cast<int8_t>(i - 16));
  w.Tensor({"q8.weight", {32}, 8, q8.bytes(), std::nullopt});
  ByteWriter bf;
  for (int i = 0; i < 4; ++i) bf.U16(F32ToBf16(i + 0.5f));
  w.Tensor({"bf.weight", {2, 1, 1, 2}, 30, bf.bytes(), std::nullopt});
  return w;
}

TEST_F(GgufTest, ValidFileRoundTrips) {
  auto f = OpenBytes(ValidWriter().Build());
  ASSERT_TRUE(f.ok()) << f.status();
  const GgufFile& g = **f;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.alignment(), 64u);
  EXPECT_EQ(g.keys().size(), 17u);
  EXPECT_EQ(g.keys()[0], "general.architecture");
  EXPECT_EQ(*g.GetString("general.architecture"), "llama");
  EXPECT_EQ(*g.GetInt("t.u8"), 200);
  EXPECT_EQ(*g.GetInt("t.i8"), -5);
  EXPECT_EQ(*g.GetInt("t.u16"), 60000);
  EXPECT_EQ(*g.GetInt("t.i16"), -300);
  EXPECT_EQ(*g.GetInt("t.u32"), 4000000000ll);
  EXPECT_EQ(*g.GetInt("t.i32"), -7);
  EXPECT_EQ(*g.GetInt("t.u64"), 1ll << 40);
  EXPECT_EQ(*g.GetInt("t.i64"), -(1ll << 40));
  EXPECT_EQ(*g.GetFloat("t.f32"), 0.5);
  EXPECT_EQ(*g.GetFloat("t.f64"), 0.25);
  EXPECT_EQ(*g.GetFloat("t.i32"), -7.0);  // ints widen to float
  EXPECT_TRUE(*g.GetBool("t.bool"));
  EXPECT_EQ(*g.GetIntOr("absent", 9), 9);
  EXPECT_EQ(*g.GetFloatOr("absent", 1.5), 1.5);
  EXPECT_FALSE(*g.GetBoolOr("absent", false));

  auto strs = g.GetArray("t.strings", GgufValueType::kString);
  ASSERT_TRUE(strs.ok()) << strs.status();
  EXPECT_EQ((*strs)->strings, (std::vector<std::string>{"<unk>", "a b", ""}));
  EXPECT_EQ((*strs)->size(), 3u);
  auto ints = g.GetArray("t.ints", GgufValueType::kInt32);
  ASSERT_TRUE(ints.ok());
  EXPECT_EQ((*ints)->ints, (std::vector<int64_t>{1, -2, 3}));
  EXPECT_TRUE(g.GetArray("t.ints", GgufValueType::kUint32).ok());  // same kind
  auto floats = g.GetArray("t.floats", GgufValueType::kFloat32);
  ASSERT_TRUE(floats.ok());
  EXPECT_EQ((*floats)->floats, (std::vector<double>{1.5, -2.5}));
  auto bools = g.GetArray("t.bools", GgufValueType::kBool);
  ASSERT_TRUE(bools.ok());
  EXPECT_EQ((*bools)->ints, (std::vector<int64_t>{1, 0}));

  ASSERT_EQ(g.tensors().size(), 5u);
  const GgufTensor* mat = g.FindTensor("mat.weight");
  ASSERT_NE(mat, nullptr);
  EXPECT_EQ(mat->n_dims, 2);
  EXPECT_EQ(mat->ne, (std::array<int64_t, 4>{4, 3, 1, 1}));
  EXPECT_EQ(mat->nrows(), 3);
  EXPECT_EQ(mat->nbytes, 48u);
  EXPECT_EQ(mat->offset % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(mat->data) % 64, 0u);
  std::vector<float> row(8);
  DequantizeRow(mat->type, mat->row(2), row.data(), 4);
  EXPECT_EQ(row[0], 4.0f);
  EXPECT_EQ(row[3], 5.5f);
  const GgufTensor* half = g.FindTensor("half.weight");
  ASSERT_NE(half, nullptr);
  EXPECT_EQ(half->type, GgmlType::kF16);
  DequantizeRow(half->type, half->row(1), row.data(), 8);
  EXPECT_EQ(row[7], 15 * 0.25f);
  const GgufTensor* q8 = g.FindTensor("q8.weight");
  ASSERT_NE(q8, nullptr);
  EXPECT_EQ(q8->nbytes, 34u);
  std::vector<float> q(32);
  DequantizeRow(q8->type, q8->data, q.data(), 32);
  EXPECT_EQ(q[0], -8.0f);
  EXPECT_EQ(q[31], 7.5f);
  const GgufTensor* bf = g.FindTensor("bf.weight");
  ASSERT_NE(bf, nullptr);
  EXPECT_EQ(bf->n_dims, 4);
  EXPECT_EQ(bf->nrows(), 2);
  DequantizeRow(bf->type, bf->row(1), row.data(), 2);
  EXPECT_EQ(row[1], 3.5f);
  EXPECT_EQ(g.FindTensor("absent"), nullptr);
}

TEST_F(GgufTest, Version2IsAccepted) {
  GgufWriter w = ValidWriter();
  w.version = 2;
  auto f = OpenBytes(w.Build());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->version(), 2u);
}

TEST_F(GgufTest, DefaultAlignmentIs32) {
  GgufWriter w;
  w.F32Tensor("a", {3}, {1, 2, 3}).F32Tensor("b", {2}, {4, 5});
  auto f = OpenBytes(w.Build());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->alignment(), 32u);
  EXPECT_EQ((*f)->FindTensor("b")->offset, 32u);
  float b1;
  std::memcpy(&b1, (*f)->FindTensor("b")->data + 4, sizeof(b1));
  EXPECT_EQ(b1, 5.0f);
}

TEST_F(GgufTest, NoTensorsAndNoKeys) {
  auto f = OpenBytes(GgufWriter().Build());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE((*f)->tensors().empty());
  EXPECT_TRUE((*f)->keys().empty());
}

TEST_F(GgufTest, MissingFileIsNotFound) {
  auto f = GgufFile::Open(dir_ + "/does-not-exist.gguf");
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(GgufFile::Open(dir_).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(GgufTest, EmptyAndTruncatedHeader) {
  ExpectInvalid("", {"empty"});
  ExpectInvalid("GG", {"truncated", "magic"});
  const std::string good = ValidWriter().Build();
  ExpectInvalid(good.substr(0, 6), {"truncated", "version"});
  ExpectInvalid(good.substr(0, 12), {"truncated", "tensor count"});
  ExpectInvalid(good.substr(0, 20), {"truncated", "key count"});
}

TEST_F(GgufTest, BadMagic) {
  GgufWriter w;
  w.magic = 0x46554746;
  ExpectInvalid(w.Build(), {"magic"});
}

TEST_F(GgufTest, UnsupportedVersions) {
  for (uint32_t v : {0u, 1u, 4u, 0x03000000u}) {
    GgufWriter w;
    w.version = v;
    ExpectError(w.Build(), absl::StatusCode::kUnimplemented, {"version"});
  }
}

TEST_F(GgufTest, CountsThatCannotFit) {
  GgufWriter w = ValidWriter();
  w.n_kv_override = 1ull << 60;
  ExpectInvalid(w.Build(), {"key count", "cannot fit"});
  w = ValidWriter();
  w.n_tensors_override = 1ull << 60;
  ExpectInvalid(w.Build(), {"tensor count", "cannot fit"});
  w = ValidWriter();
  w.n_kv_override = ~0ull;
  ExpectInvalid(w.Build(), {"key count"});
  // A plausible count that still runs off the end is a truncation.
  w = GgufWriter();
  w.String("a", "b");
  w.n_kv_override = 2;
  ExpectInvalid(w.Build() + std::string(12, '\0'), {"truncated"});
}

TEST_F(GgufTest, StringLengthPastEnd) {
  GgufWriter w;
  w.KV("k", gt::kString, GgufWriter::Enc<uint64_t>(1ull << 40) + "abc");
  ExpectInvalid(w.Build(), {"'k'", "length", "past the end"});
  // The key's own length field (at offset 24) corrupted.
  std::string bytes = ValidWriter().Build();
  const std::string huge = GgufWriter::Enc<uint64_t>(~0ull - 3);
  bytes.replace(24, 8, huge);
  ExpectInvalid(bytes, {"metadata key #0", "offset 24", "past the end"});
}

TEST_F(GgufTest, ArrayLengthPastEnd) {
  GgufWriter w;
  w.RawArray("arr", gt::kInt32, 1ull << 40, std::string(8, '\0'));
  ExpectInvalid(w.Build(), {"array 'arr'", "past the end"});
  w = GgufWriter();
  w.RawArray("strs", gt::kString, 3,
             GgufWriter::EncStr("x") + GgufWriter::EncStr("y") + GgufWriter::Enc<uint64_t>(100));
  ExpectInvalid(w.Build(), {"element 2", "'strs'"});
}

TEST_F(GgufTest, UnknownValueTypes) {
  GgufWriter w;
  w.KV("weird.key", 99, std::string(8, '\0'));
  ExpectInvalid(w.Build(), {"unknown value type 99", "weird.key"});
  w = GgufWriter();
  w.RawArray("weird.arr", 13, 1, std::string(8, '\0'));
  ExpectInvalid(w.Build(), {"unknown value type 13", "weird.arr"});
}

TEST_F(GgufTest, NestedArrayIsRefused) {
  ByteWriter inner;
  inner.U32(gt::kInt32).U64(1).I32(5);
  GgufWriter w;
  w.RawArray("nested", gt::kArray, 1, inner.bytes());
  ExpectError(w.Build(), absl::StatusCode::kUnimplemented, {"nested", "'nested'"});
}

TEST_F(GgufTest, DuplicateKeyAndTensor) {
  GgufWriter w;
  w.U32("dup.key", 1).U32("dup.key", 2);
  ExpectInvalid(w.Build(), {"duplicate", "dup.key"});
  w = GgufWriter();
  w.F32Tensor("t", {1}, {1}).F32Tensor("t", {1}, {2});
  ExpectInvalid(w.Build(), {"duplicate tensor", "'t'"});
}

TEST_F(GgufTest, BadDimensions) {
  GgufWriter w;
  w.Tensor({"five", {1, 1, 1, 1, 1}, 0, std::string(4, '\0'), std::nullopt});
  ExpectInvalid(w.Build(), {"'five'", "dimensions"});
  w = GgufWriter();
  w.Tensor({"zero", {}, 0, std::string(4, '\0'), std::nullopt});
  ExpectInvalid(w.Build(), {"'zero'", "dimensions"});
  for (int64_t bad : {int64_t{0}, int64_t{-1}, INT64_MIN}) {
    w = GgufWriter();
    w.Tensor({"neg", {4, bad}, 0, std::string(16, '\0'), std::nullopt});
    ExpectInvalid(w.Build(), {"'neg'", "ne[1]"});
  }
}

TEST_F(GgufTest, SizeOverflow) {
  GgufWriter w;
  w.Tensor({"big", {1ll << 32, 1ll << 32}, 0, "", std::nullopt});
  ExpectInvalid(w.Build(), {"'big'", "element count overflows"});
  w = GgufWriter();
  w.Tensor({"bytes", {1ll << 40, 1ll << 22}, 0, "", std::nullopt});  // 2^62 F32
  ExpectInvalid(w.Build(), {"'bytes'", "byte size overflows"});
  w = GgufWriter();
  w.Tensor({"huge", {1ll << 20, 1ll << 20}, 0, "", std::nullopt});  // fits, not in file
  ExpectInvalid(w.Build(), {"'huge'", "outside the file"});
}

TEST_F(GgufTest, RowNotAMultipleOfTheBlock) {
  GgufWriter w;
  w.Tensor({"ragged", {33, 1}, 8, std::string(68, '\0'), std::nullopt});
  ExpectInvalid(w.Build(), {"'ragged'", "multiple", "Q8_0"});
}

TEST_F(GgufTest, UnknownTensorType) {
  for (uint32_t type : {4u, 31u, 77u}) {
    GgufWriter w;
    w.Tensor({"odd", {32}, type, std::string(128, '\0'), std::nullopt});
    ExpectInvalid(w.Build(), {"'odd'", "unknown ggml tensor type " + std::to_string(type)});
  }
}

TEST_F(GgufTest, KnownButUnsupportedTypeLoads) {
  GgufWriter w;
  w.Tensor({"q4", {64, 2}, 2, std::string(4 * 18, '\0'), std::nullopt});  // Q4_0
  auto f = OpenBytes(w.Build());
  ASSERT_TRUE(f.ok()) << f.status();
  const GgufTensor* t = (*f)->FindTensor("q4");
  EXPECT_EQ(t->nbytes, 72u);
  EXPECT_EQ(t->row_bytes(), 36u);
  EXPECT_FALSE(GetTypeTraits(static_cast<uint32_t>(t->type))->supported);
}

TEST_F(GgufTest, BadAlignment) {
  for (uint32_t a : {0u, 24u, 33u}) {
    GgufWriter w;
    w.U32("general.alignment", a);
    ExpectInvalid(w.Build(), {"alignment", "power of two"});
  }
  GgufWriter w;
  w.U64("general.alignment", 32);
  ExpectInvalid(w.Build(), {"alignment", "uint32", "uint64"});
  w = GgufWriter();
  w.String("general.alignment", "32");
  ExpectInvalid(w.Build(), {"alignment", "uint32", "string"});
}

TEST_F(GgufTest, TensorDataOutsideOrMisaligned) {
  GgufWriter w;
  w.Tensor({"short", {16}, 0, std::string(32, '\0'), std::nullopt});  // needs 64 bytes
  ExpectInvalid(w.Build(), {"'short'", "outside the file"});
  w = GgufWriter();
  w.Tensor({"far", {1}, 0, "", uint64_t{~0ull & ~31ull}});
  ExpectInvalid(w.Build(), {"'far'", "outside the file"});
  w = GgufWriter();
  w.F32Tensor("a", {1}, {1});
  w.Tensor({"skew", {1}, 0, std::string(4, '\0'), uint64_t{36}});
  ExpectInvalid(w.Build(), {"'skew'", "misaligned", "32"});
}

// Open() only needs each tensor inside the file; overlaps and gaps are
// CheckDataLayout()'s (which Model::Load runs).
TEST_F(GgufTest, OverlappingTensorsOpenButFailTheLayoutCheck) {
  GgufWriter w;
  w.F32Tensor("a", {4}, {1, 2, 3, 4});
  w.Tensor({"b", {2}, 0, "", uint64_t{0}});
  auto f = OpenBytes(w.Build());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->FindTensor("a")->data, (*f)->FindTensor("b")->data);
  const absl::Status s = (*f)->CheckDataLayout();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("'a'"), HasSubstr("'b'"), HasSubstr("overlaps")));
}

TEST_F(GgufTest, DataLayout) {
  // What the writer lays out (each tensor at the next aligned offset) passes,
  // as do the bundled models.
  auto f = OpenBytes(ValidWriter().Build());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE((*f)->CheckDataLayout().ok()) << (*f)->CheckDataLayout();
  EXPECT_EQ((*f)->data_start() % 64, 0u);
  EXPECT_EQ((*f)->FindTensor("norm.weight")->data - (*f)->FindTensor("mat.weight")->data, -64);
  for (const char* m : {"code-target-7m.gguf", "code-draft-1m.gguf", "code-bpe-4m.gguf"}) {
    auto g = GgufFile::Open(testing::BundledModel(m));
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_TRUE((*g)->CheckDataLayout().ok()) << m << ": " << (*g)->CheckDataLayout();
  }
  // The data need not be in the tensor infos' order.
  GgufWriter w;
  w.Tensor({"second", {8}, 0, std::string(32, '\0'), uint64_t{32}});
  w.Tensor({"first", {8}, 0, std::string(32, '\0'), uint64_t{0}});
  f = OpenBytes(w.Build());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE((*f)->CheckDataLayout().ok()) << (*f)->CheckDataLayout();

  auto expect_bad = [&](const GgufWriter& bad, const std::vector<std::string>& subs) {
    auto g = OpenBytes(bad.Build());
    ASSERT_TRUE(g.ok()) << g.status();
    const absl::Status s = (*g)->CheckDataLayout();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    for (const auto& sub : subs) EXPECT_THAT(std::string(s.message()), HasSubstr(sub));
  };
  // A gap between two tensors: 32 bytes no tensor covers.
  w = GgufWriter();
  w.Tensor({"a", {8}, 0, std::string(32, '\0'), uint64_t{0}});
  w.Tensor({"b", {8}, 0, std::string(32, '\0'), uint64_t{64}});
  expect_bad(w, {"32 unused bytes", "'a'", "'b'", "expected at data offset 32"});
  // The first tensor not at the start of the data section.
  w = GgufWriter();
  w.Tensor({"late", {8}, 0, std::string(32, '\0'), uint64_t{32}});
  expect_bad(w, {"'late'", "not 0"});
  // Bytes after the last tensor beyond the padding (its data is 64 bytes,
  // its shape says 32).
  w = GgufWriter();
  w.Tensor({"short", {8}, 0, std::string(64, '\0'), std::nullopt});
  expect_bad(w, {"32 unused bytes", "'short'", "F32 [8]", "end of the file"});
  // A partial tensor: ends inside another one.
  w = GgufWriter();
  w.Tensor({"a", {16}, 0, std::string(64, '\0'), uint64_t{0}});
  w.Tensor({"b", {8}, 0, std::string(32, '\0'), uint64_t{32}});
  expect_bad(w, {"'b'", "overlaps", "'a' (F32 [16], 64 bytes at data offset 0)"});
}

TEST_F(GgufTest, TypedGettersNameKeyAndTypes) {
  auto f = OpenBytes(ValidWriter().Build());
  ASSERT_TRUE(f.ok()) << f.status();
  const GgufFile& g = **f;
  auto i = g.GetInt("general.architecture");
  EXPECT_EQ(i.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(i.status().message()),
              AllOf(HasSubstr("general.architecture"), HasSubstr("string"), HasSubstr("integer")));
  EXPECT_EQ(g.GetIntOr("general.architecture", 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.GetString("absent").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(g.GetString("t.u32").status().message()),
              AllOf(HasSubstr("t.u32"), HasSubstr("uint32"), HasSubstr("string")));
  EXPECT_EQ(g.GetBool("t.u8").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.GetInt("t.bool").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.GetFloat("t.strings").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.GetFloat("t.f32").value(), 0.5);
  auto arr = g.GetArray("t.strings", GgufValueType::kInt32);
  EXPECT_THAT(std::string(arr.status().message()),
              AllOf(HasSubstr("t.strings"), HasSubstr("array of string"),
                    HasSubstr("array of int32")));
  EXPECT_EQ(g.GetArray("t.u8", GgufValueType::kUint8).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.GetArray("absent", GgufValueType::kUint8).status().code(),
            absl::StatusCode::kNotFound);

  GgufWriter w;
  w.U64("too.big", ~0ull);
  auto big = OpenBytes(w.Build());
  ASSERT_TRUE(big.ok());
  EXPECT_THAT(std::string((*big)->GetInt("too.big").status().message()), HasSubstr("int64"));
}

TEST_F(GgufTest, Describe) {
  auto f = OpenBytes(ValidWriter().Build());
  ASSERT_TRUE(f.ok());
  const GgufFile& g = **f;
  EXPECT_EQ(GgufFile::Describe(*g.Find("general.architecture")), "\"llama\"");
  EXPECT_EQ(GgufFile::Describe(*g.Find("t.i8")), "-5");
  EXPECT_EQ(GgufFile::Describe(*g.Find("t.bool")), "true");
  EXPECT_EQ(GgufFile::Describe(*g.Find("t.f32")), "0.5");
  EXPECT_EQ(GgufFile::Describe(*g.Find("t.strings")), "[string x 3] {\"<unk>\", \"a b\", \"\"}");
  EXPECT_EQ(GgufValueTypeName(GgufValueType::kFloat64), "float64");
}

volatile uint64_t g_sink;  // keeps the reads in TouchAll from being optimised away

// Reads every byte of every tensor view, dequantizes what is supported and
// describes every value: what opened must be safe to use.
uint64_t TouchAll(const GgufFile& g) {
  uint64_t sum = 0;
  for (const GgufTensor& t : g.tensors()) {
    for (uint64_t i = 0; i < t.nbytes; ++i) sum += t.data[i];
    auto tr = GetTypeTraits(static_cast<uint32_t>(t.type));
    if (tr && tr->supported) {
      std::vector<float> row(t.row_length());
      for (int64_t r = 0; r < t.nrows(); ++r) {
        DequantizeRow(t.type, t.row(r), row.data(), t.row_length());
      }
    }
  }
  for (const auto& k : g.keys()) sum += GgufFile::Describe(*g.Find(k)).size();
  return sum;
}

// Opens must finish (ok or error) for every truncation and for random byte
// corruptions; what opens must have every tensor inside the mapping (reading
// the views trips ASan / SIGSEGV otherwise).
TEST_F(GgufTest, CorruptionAndTruncationNeverCrash) {
  const std::string good = ValidWriter().Build();
  int ok = 0;
  for (size_t len = 0; len < good.size(); ++len) {
    auto f = OpenBytes(good.substr(0, len));
    if (f.ok()) {
      ++ok;
      g_sink = g_sink + TouchAll(**f);
    } else {
      EXPECT_NE(f.status().code(), absl::StatusCode::kNotFound);
    }
  }
  EXPECT_EQ(ok, 0) << "a truncated file opened";  // the last tensor ends the file
  std::mt19937 rng(1234);
  std::uniform_int_distribution<size_t> pos(0, good.size() - 1);
  std::uniform_int_distribution<int> byte(0, 255);
  int opened = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    std::string bad = good;
    const size_t p = pos(rng);
    // Mostly random bytes; sometimes values that make lengths and counts huge.
    const int kind = iter % 4;
    bad[p] = static_cast<char>(kind == 0 ? 0xff : kind == 1 ? 0x80 : byte(rng));
    auto f = OpenBytes(bad);
    if (f.ok()) {
      ++opened;
      g_sink = g_sink + TouchAll(**f);
    }
  }
  EXPECT_GT(opened, 0);  // corrupting tensor data or a value is harmless
}

// The metadata of a real model (a 4096-entry vocabulary) with a few bytes
// corrupted at a time, cut before the end of the tensor data: most fail,
// and what opens (a corrupted count can drop tensors) must be usable.
TEST_F(GgufTest, CorruptedRealMetadataNeverCrashes) {
  std::ifstream in(testing::BundledModel("code-draft-1m.gguf"), std::ios::binary);
  std::string head(96 * 1024, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  ASSERT_EQ(in.gcount(), static_cast<std::streamsize>(head.size()));
  std::mt19937 rng(99);
  std::uniform_int_distribution<size_t> pos(0, head.size() - 1);
  for (int iter = 0; iter < 300; ++iter) {
    std::string bad = head;
    for (int k = 0; k <= iter % 4; ++k) bad[pos(rng)] = static_cast<char>(rng());
    auto f = OpenBytes(bad);
    if (f.ok()) g_sink = g_sink + TouchAll(**f);
  }
}

TEST(GgufBundledModels, TargetAndDraftFacts) {
  const std::string target = specserve::testing::BundledModel("code-target-7m.gguf");
  const auto t0 = std::chrono::steady_clock::now();
  auto f = GgufFile::Open(target);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(f.ok()) << f.status();
  std::printf("opened %s in %.2f ms\n", target.c_str(), ms);
  EXPECT_LT(ms, 1000.0);  // a regression guard; it is a few ms in release builds
  const GgufFile& g = **f;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(*g.GetString("general.architecture"), "llama");
  EXPECT_EQ(*g.GetInt("llama.embedding_length"), 288);
  EXPECT_EQ(*g.GetInt("llama.block_count"), 6);
  EXPECT_EQ(*g.GetInt("llama.attention.head_count_kv"), 2);
  EXPECT_NEAR(*g.GetFloat("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-10);
  const GgufTensor* emb = g.FindTensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->n_dims, 2);
  EXPECT_EQ(emb->ne, (std::array<int64_t, 4>{288, 4096, 1, 1}));
  EXPECT_EQ(emb->type, GgmlType::kF16);
  EXPECT_EQ(emb->nbytes, 288u * 4096u * 2u);
  EXPECT_EQ(g.FindTensor("output.weight"), nullptr);  // tied embeddings
  EXPECT_EQ(g.FindTensor("output_norm.weight")->type, GgmlType::kF32);
  auto tokens = g.GetArray("tokenizer.ggml.tokens", GgufValueType::kString);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  ASSERT_EQ((*tokens)->strings.size(), 4096u);
  EXPECT_EQ((*tokens)->strings[0], "<unk>");
  EXPECT_EQ((*tokens)->strings[1], "<s>");
  EXPECT_EQ((*tokens)->strings[0x0A + 3], "<0x0A>");
  EXPECT_EQ((*g.GetArray("tokenizer.ggml.scores", GgufValueType::kFloat32))->floats.size(), 4096u);
  EXPECT_EQ((*g.GetArray("tokenizer.ggml.token_type", GgufValueType::kInt32))->ints[0], 2);
  std::vector<float> row(288);
  DequantizeRow(emb->type, emb->row(4095), row.data(), 288);
  for (float x : row) ASSERT_TRUE(std::isfinite(x));

  auto d = GgufFile::Open(specserve::testing::BundledModel("code-draft-1m.gguf"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*(*d)->GetString("general.architecture"), "llama");
  EXPECT_EQ(*(*d)->GetInt("llama.embedding_length"), 128);
  EXPECT_EQ((*d)->FindTensor("token_embd.weight")->ne[0], 128);
  EXPECT_EQ((*(*d)->GetArray("tokenizer.ggml.tokens", GgufValueType::kString))->size(), 4096u);
}

}  // namespace
}  // namespace specserve
