// GGUF writer: the reader's (common/gguf.h) counterpart. Layout as in the
// GGUF v3 spec (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md):
//   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
//   n_kv x (string key, u32 value type, value)
//   n_tensors x (string name, u32 n_dims, i64 ne[n_dims], u32 type, u64 offset)
//   padding to the alignment | tensor data (each at an aligned offset)
// A string is a u64 byte length followed by the bytes; all little-endian.
//
// The tensor infos carry each tensor's offset, so the writer is told every
// tensor's type and shape first (AddTensor), writes the header (Open), then
// takes the payloads one at a time in the order they were added
// (WriteTensor): a model is never held twice in memory.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/gguf.h"
#include "common/tensor_types.h"

namespace specserve {

// Little-endian byte builder.
class ByteWriter {
 public:
  template <typename T>
  ByteWriter& Scalar(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    bytes_.append(b, sizeof(T));
    return *this;
  }
  ByteWriter& U8(uint8_t v) { return Scalar(v); }
  ByteWriter& U16(uint16_t v) { return Scalar(v); }
  ByteWriter& U32(uint32_t v) { return Scalar(v); }
  ByteWriter& U64(uint64_t v) { return Scalar(v); }
  ByteWriter& I32(int32_t v) { return Scalar(v); }
  ByteWriter& I64(int64_t v) { return Scalar(v); }
  ByteWriter& F32(float v) { return Scalar(v); }
  ByteWriter& F64(double v) { return Scalar(v); }
  ByteWriter& Str(std::string_view s) {
    U64(s.size());
    bytes_.append(s);
    return *this;
  }
  ByteWriter& Raw(std::string_view s) {
    bytes_.append(s);
    return *this;
  }
  ByteWriter& PadTo(size_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back('\0');
    return *this;
  }
  const std::string& bytes() const { return bytes_; }
  size_t size() const { return bytes_.size(); }

 private:
  std::string bytes_;
};

// The encoded bytes of V after its type field (as GgufFile decoded it: an
// array keeps its element type).
std::string EncodeGgufValue(const GgufValue& v);

class GgufWriter {
 public:
  GgufWriter() = default;
  ~GgufWriter();
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  // Metadata, in file order. A key set twice keeps its first place and its
  // last value. general.alignment (a uint32 power of two) sets the padding.
  void Set(std::string_view key, const GgufValue& v);
  void SetU32(std::string_view key, uint32_t v);
  void SetI32(std::string_view key, int32_t v);
  void SetF32(std::string_view key, float v);
  void SetString(std::string_view key, std::string_view v);
  bool Has(std::string_view key) const;

  // A tensor of TYPE with dims NE (ne[0] innermost, as ggml); ne[0] must be a
  // multiple of the type's block size. INVALID_ARGUMENT otherwise.
  absl::Status AddTensor(std::string_view name, GgmlType type, std::vector<int64_t> ne);

  // Creates PATH and writes the header and tensor infos.
  absl::Status Open(const std::string& path);
  // The next tensor's payload, exactly its size (RowBytes x rows) in bytes.
  absl::Status WriteTensor(const void* data, uint64_t nbytes);
  // After the last tensor: flushes and closes; checks every tensor was written.
  absl::Status Close();

  uint64_t TensorBytes(size_t i) const { return tensors_[i].nbytes; }
  size_t tensor_count() const { return tensors_.size(); }

 private:
  struct TensorInfo {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    uint64_t nbytes = 0;
    uint64_t offset = 0;  // relative to the data section
  };
  absl::Status Write(const void* p, size_t n);
  absl::Status Pad(uint64_t to);

  std::vector<std::pair<std::string, std::string>> kvs_;  // key, type + value bytes
  std::vector<TensorInfo> tensors_;
  uint64_t alignment_ = 32;
  std::string path_;
  std::FILE* f_ = nullptr;
  uint64_t pos_ = 0;          // bytes written to the file
  uint64_t data_start_ = 0;
  size_t next_tensor_ = 0;
};

}  // namespace specserve
