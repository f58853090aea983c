// GGUF reader: memory-maps a file, validates every header field against the
// file size before trusting it, and exposes metadata and tensors as views.
// Spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md (v2 and v3).
//
// Nothing here allocates in proportion to a count read from the file before
// that count has been checked against the bytes that remain, so a hostile or
// truncated file yields an absl::Status, never a crash or a huge allocation.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/tensor_types.h"

namespace specserve {

// GGUF metadata value types, numbered as in the spec.
enum class GgufValueType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5,
  kFloat32 = 6, kBool = 7, kString = 8, kArray = 9, kUint64 = 10,
  kInt64 = 11, kFloat64 = 12,
};
std::string_view GgufValueTypeName(GgufValueType t);

// An array value keeps its element type; its elements are decoded eagerly
// (arrays in model files are the tokenizer's: tokens, scores, types, merges).
struct GgufArray {
  GgufValueType elem_type;
  std::vector<int64_t> ints;        // all integer and bool element types
  std::vector<double> floats;       // float32 / float64
  std::vector<std::string> strings; // string
  size_t size() const;
};

struct GgufValue {
  GgufValueType type;
  std::variant<uint64_t, int64_t, double, bool, std::string, GgufArray> v;
};

struct GgufTensor {
  std::string name;
  GgmlType type;
  int n_dims = 0;
  // ne[0] is the innermost (contiguous) dimension: a matrix [rows, cols] in
  // row-major terms has ne = {cols, rows, 1, 1}. Unused dims are 1.
  std::array<int64_t, 4> ne = {1, 1, 1, 1};
  const uint8_t* data = nullptr;  // view into the mapping
  uint64_t nbytes = 0;
  uint64_t offset = 0;            // relative to the data section

  int64_t nelements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  // The dims outermost first, as "[rows, cols]" for a matrix ("[n]" for a
  // vector): the reverse of ne, n_dims of them.
  std::string ShapeString() const;
  int64_t row_length() const { return ne[0]; }
  int64_t nrows() const { return ne[1] * ne[2] * ne[3]; }
  size_t row_bytes() const;  // bytes of one row of ne[0] elements
  const uint8_t* row(int64_t r) const { return data + r * row_bytes(); }
};

class GgufFile {
 public:
  // Maps and validates `path`. Errors: NOT_FOUND (cannot open),
  // INVALID_ARGUMENT (malformed: the message names the field and offset),
  // UNIMPLEMENTED (valid GGUF using a feature this reader lacks).
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint64_t file_size() const { return size_; }
  uint32_t alignment() const { return alignment_; }
  // Where the data section starts in the file; tensor offsets are relative
  // to it.
  uint64_t data_start() const { return data_start_; }
  const std::string& path() const { return path_; }

  bool Has(std::string_view key) const;
  const GgufValue* Find(std::string_view key) const;
  const std::vector<std::string>& keys() const { return key_order_; }

  // Typed getters. NOT_FOUND when absent; INVALID_ARGUMENT naming the key and
  // both types when the stored type does not fit (GetInt accepts any integer
  // type whose value fits int64; GetFloat accepts float32/float64 and ints).
  absl::StatusOr<std::string> GetString(std::string_view key) const;
  absl::StatusOr<int64_t> GetInt(std::string_view key) const;
  absl::StatusOr<double> GetFloat(std::string_view key) const;
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  absl::StatusOr<const GgufArray*> GetArray(std::string_view key,
                                            GgufValueType elem_type) const;
  // Same, with a default when the key is absent (a wrong type is still an error).
  absl::StatusOr<int64_t> GetIntOr(std::string_view key, int64_t dflt) const;
  absl::StatusOr<double> GetFloatOr(std::string_view key, double dflt) const;
  absl::StatusOr<bool> GetBoolOr(std::string_view key, bool dflt) const;

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* FindTensor(std::string_view name) const;

  // Checks that the tensor data is laid out as GGUF writers (ggml, gguf-py)
  // lay it out: taken in offset order, the first tensor starts the data
  // section and each next one starts where the previous one ends, rounded up
  // to the alignment; after the last one there are fewer than `alignment`
  // bytes of padding. Open() only checks that each tensor lies inside the
  // file, aligned; this catches two tensors sharing bytes and bytes that no
  // tensor covers, which is what a moved offset or a tensor whose type or
  // shape no longer matches its data leaves behind. INVALID_ARGUMENT naming
  // both tensors (type, shape, size and offsets) otherwise.
  absl::Status CheckDataLayout() const;

  // A short human-readable description of a value (for `specserve inspect`).
  static std::string Describe(const GgufValue& v);

 private:
  GgufFile() = default;
  friend class GgufParser;

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_start_ = 0;
  std::vector<std::string> key_order_;
  absl::flat_hash_map<std::string, GgufValue> kv_;
  std::vector<GgufTensor> tensors_;
  absl::flat_hash_map<std::string, size_t> tensor_index_;
};

}  // namespace specserve
