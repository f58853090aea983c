// Test-only GGUF writer: builds valid files in memory and, through its overrides and raw
// escape hatches, malformed ones. Layout as in the GGUF v2/v3 spec:
//   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
//   n_kv x (string key, u32 value type, value)
//   n_tensors x (string name, u32 n_dims, i64 ne[n_dims], u32 type, u64 offset)
//   padding to the alignment | tensor data (each at an aligned offset)
// A string is a u64 byte length followed by the bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/gguf_writer.h"

namespace specserve::testing {

// The library's little-endian byte builder (common/gguf_writer.h, whose
// streaming GgufWriter writes the real files).
using ::specserve::ByteWriter;

// GGUF value type numbers (the spec's; duplicated so malformed files can use
// any number).
namespace gguf_type {
constexpr uint32_t kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5,
                   kFloat32 = 6, kBool = 7, kString = 8, kArray = 9, kUint64 = 10,
                   kInt64 = 11, kFloat64 = 12;
}  // namespace gguf_type

struct TensorSpec {
  std::string name;
  std::vector<int64_t> ne;          // written as given (n_dims = ne.size())
  uint32_t type = 0;                // ggml type number (0 = F32)
  std::string data;                 // payload bytes, written at `offset`
  std::optional<uint64_t> offset;   // default: next aligned offset after the previous tensor
};

class GgufWriter {
 public:
  static constexpr uint32_t kMagic = 0x46554747;  // "GGUF"

  // Header fields; the counts default to the true ones.
  uint32_t magic = kMagic;
  uint32_t version = 3;
  std::optional<uint64_t> n_tensors_override;
  std::optional<uint64_t> n_kv_override;
  // Used to pad to and place the data section. Alignment() also records it
  // as general.alignment; setting this alone writes no key.
  uint64_t alignment = 32;

  // Raw key/value: `value` is the encoded value bytes after the type field.
  GgufWriter& KV(std::string_view key, uint32_t type, std::string value) {
    ByteWriter w;
    w.Str(key).U32(type).Raw(value);
    kvs_.push_back(w.bytes());
    return *this;
  }
  template <typename T>
  static std::string Enc(T v) {
    ByteWriter w;
    w.Scalar(v);
    return w.bytes();
  }
  static std::string EncStr(std::string_view s) {
    ByteWriter w;
    w.Str(s);
    return w.bytes();
  }

  GgufWriter& U8(std::string_view k, uint8_t v) { return KV(k, gguf_type::kUint8, Enc(v)); }
  GgufWriter& I8(std::string_view k, int8_t v) { return KV(k, gguf_type::kInt8, Enc(v)); }
  GgufWriter& U16(std::string_view k, uint16_t v) { return KV(k, gguf_type::kUint16, Enc(v)); }
  GgufWriter& I16(std::string_view k, int16_t v) { return KV(k, gguf_type::kInt16, Enc(v)); }
  GgufWriter& U32(std::string_view k, uint32_t v) { return KV(k, gguf_type::kUint32, Enc(v)); }
  GgufWriter& I32(std::string_view k, int32_t v) { return KV(k, gguf_type::kInt32, Enc(v)); }
  GgufWriter& U64(std::string_view k, uint64_t v) { return KV(k, gguf_type::kUint64, Enc(v)); }
  GgufWriter& I64(std::string_view k, int64_t v) { return KV(k, gguf_type::kInt64, Enc(v)); }
  GgufWriter& F32(std::string_view k, float v) { return KV(k, gguf_type::kFloat32, Enc(v)); }
  GgufWriter& F64(std::string_view k, double v) { return KV(k, gguf_type::kFloat64, Enc(v)); }
  GgufWriter& Bool(std::string_view k, bool v) {
    return KV(k, gguf_type::kBool, Enc<uint8_t>(v ? 1 : 0));
  }
  GgufWriter& String(std::string_view k, std::string_view v) {
    return KV(k, gguf_type::kString, EncStr(v));
  }
  // Array with raw element bytes (`n` is written as the count as given).
  GgufWriter& RawArray(std::string_view k, uint32_t elem_type, uint64_t n, std::string elems) {
    ByteWriter w;
    w.U32(elem_type).U64(n).Raw(elems);
    return KV(k, gguf_type::kArray, w.bytes());
  }
  GgufWriter& StringArray(std::string_view k, const std::vector<std::string>& v) {
    ByteWriter w;
    for (const auto& s : v) w.Str(s);
    return RawArray(k, gguf_type::kString, v.size(), w.bytes());
  }
  GgufWriter& I32Array(std::string_view k, const std::vector<int32_t>& v) {
    ByteWriter w;
    for (int32_t x : v) w.I32(x);
    return RawArray(k, gguf_type::kInt32, v.size(), w.bytes());
  }
  GgufWriter& F32Array(std::string_view k, const std::vector<float>& v) {
    ByteWriter w;
    for (float x : v) w.F32(x);
    return RawArray(k, gguf_type::kFloat32, v.size(), w.bytes());
  }
  // general.alignment as a uint32, and pad the file to match.
  GgufWriter& Alignment(uint32_t a) {
    alignment = a;
    return U32("general.alignment", a);
  }

  GgufWriter& Tensor(TensorSpec t) {
    tensors_.push_back(std::move(t));
    return *this;
  }
  // An F32 tensor holding `values` (ne as given; product should match).
  GgufWriter& F32Tensor(std::string name, std::vector<int64_t> ne,
                        const std::vector<float>& values) {
    std::string data(values.size() * sizeof(float), '\0');
    if (!values.empty()) std::memcpy(data.data(), values.data(), data.size());
    return Tensor({std::move(name), std::move(ne), 0, std::move(data), std::nullopt});
  }

  std::string Build() const {
    const uint64_t align = alignment == 0 ? 1 : alignment;
    // Place the data first: offsets go into the tensor infos.
    std::vector<uint64_t> offsets;
    uint64_t next = 0, data_size = 0;
    for (const auto& t : tensors_) {
      const uint64_t off = t.offset ? *t.offset : (next + align - 1) / align * align;
      offsets.push_back(off);
      next = off + t.data.size();
      // Only real payloads extend the file: an info may point anywhere.
      if (!t.data.empty() && next > data_size) data_size = next;
    }
    ByteWriter w;
    w.U32(magic).U32(version);
    w.U64(n_tensors_override ? *n_tensors_override : tensors_.size());
    w.U64(n_kv_override ? *n_kv_override : kvs_.size());
    for (const auto& kv : kvs_) w.Raw(kv);
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const TensorSpec& t = tensors_[i];
      w.Str(t.name).U32(static_cast<uint32_t>(t.ne.size()));
      for (int64_t d : t.ne) w.I64(d);
      w.U32(t.type).U64(offsets[i]);
    }
    if (tensors_.empty()) return w.bytes();
    w.PadTo(align);
    std::string out = w.bytes();
    const size_t data_start = out.size();
    out.resize(data_start + data_size, '\0');
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const std::string& d = tensors_[i].data;
      if (!d.empty()) std::memcpy(out.data() + data_start + offsets[i], d.data(), d.size());
    }
    return out;
  }

 private:
  std::vector<std::string> kvs_;
  std::vector<TensorSpec> tensors_;
};

// Writes `bytes` to `path` (replacing it); false on failure.
inline bool WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(f);
}

}  // namespace specserve::testing
