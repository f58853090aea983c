#include "common/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace specserve {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian
// Lower bounds used to reject counts before anything is reserved for them.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;                 // key length, type, uint8
// Name length, n_dims, ne[0], type, offset.
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
constexpr int kMaxDims = 4;

// This Abseil build has its own absl::string_view (not std::string_view):
// convert explicitly for StrCat and for heterogeneous map lookups.
absl::string_view A(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Indexed by GgufValueType. `bytes`: a scalar's size, a string's length
// prefix, 0 for an array.
struct ValueTypeInfo {
  std::string_view name;
  uint64_t bytes;
};
constexpr ValueTypeInfo kValueTypes[] = {
    {"uint8", 1},  {"int8", 1},   {"uint16", 2}, {"int16", 2}, {"uint32", 4},
    {"int32", 4},  {"float32", 4}, {"bool", 1},  {"string", 8}, {"array", 0},
    {"uint64", 8}, {"int64", 8},  {"float64", 8},
};
constexpr uint32_t kNumValueTypes = sizeof(kValueTypes) / sizeof(kValueTypes[0]);

// 0 for an array or an unknown type number.
uint64_t ScalarBytes(uint32_t type) { return type < kNumValueTypes ? kValueTypes[type].bytes : 0; }

bool IsIntegerType(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8: case GgufValueType::kInt8: case GgufValueType::kUint16:
    case GgufValueType::kInt16: case GgufValueType::kUint32: case GgufValueType::kInt32:
    case GgufValueType::kUint64: case GgufValueType::kInt64: return true;
    default: return false;
  }
}
bool IsSignedType(GgufValueType t) {
  return t == GgufValueType::kInt8 || t == GgufValueType::kInt16 ||
         t == GgufValueType::kInt32 || t == GgufValueType::kInt64;
}
bool IsFloatType(GgufValueType t) {
  return t == GgufValueType::kFloat32 || t == GgufValueType::kFloat64;
}

// Reads little-endian fields from the mapping; every read is checked against
// the file size first, and an error names what was being read and where.
class Cursor {
 public:
  Cursor(const uint8_t* base, uint64_t size) : base_(base), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  absl::Status Need(uint64_t n, std::string_view what) const {
    if (n <= remaining()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrFormat(
        "truncated file: %s at offset %d needs %d bytes, only %d remain (file is %d bytes)",
        what, pos_, n, remaining(), size_));
  }
  // Callers have checked Need(n) (possibly for a whole array at once).
  const uint8_t* Take(uint64_t n) {
    const uint8_t* p = base_ + pos_;
    pos_ += n;
    return p;
  }
  template <typename T>
  T TakeScalar() {
    T v;
    std::memcpy(&v, Take(sizeof(T)), sizeof(T));
    return v;
  }
  template <typename T>
  absl::StatusOr<T> Read(std::string_view what) {
    RETURN_IF_ERROR(Need(sizeof(T), what));
    return TakeScalar<T>();
  }
  // A GGUF string: uint64 byte length, then the bytes (no terminator).
  absl::StatusOr<std::string_view> ReadString(std::string_view what) {
    const uint64_t at = pos_;
    ASSIGN_OR_RETURN(const uint64_t len, Read<uint64_t>(what));
    if (len > remaining()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s at offset %d has length %d, past the end of the file (%d bytes remain)", what,
          at, len, remaining()));
    }
    const uint8_t* p = Take(len);
    return std::string_view(reinterpret_cast<const char*>(p), len);
  }

 private:
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

absl::Status WithPath(const std::string& path, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
}

}  // namespace

// Fills a GgufFile from its mapping, section by section, in file order.
class GgufParser {
 public:
  explicit GgufParser(GgufFile* f) : f_(f), cur_(f->base_, f->size_) {}

  absl::Status Parse() {
    uint64_t n_tensors = 0, n_kv = 0;
    RETURN_IF_ERROR(ParseHeader(&n_tensors, &n_kv));
    f_->key_order_.reserve(n_kv);
    f_->kv_.reserve(n_kv);
    for (uint64_t i = 0; i < n_kv; ++i) RETURN_IF_ERROR(ParseKv(i));
    f_->tensors_.reserve(n_tensors);
    f_->tensor_index_.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) RETURN_IF_ERROR(ParseTensorInfo(i));
    return PlaceTensorData();
  }

 private:
  absl::Status ParseHeader(uint64_t* n_tensors, uint64_t* n_kv) {
    if (f_->size_ == 0) return absl::InvalidArgumentError("truncated file: the file is empty");
    ASSIGN_OR_RETURN(const uint32_t magic, cur_.Read<uint32_t>("the magic"));
    if (magic != kGgufMagic) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "bad magic 0x%08x at offset 0 (expected \"GGUF\"): not a GGUF file", magic));
    }
    ASSIGN_OR_RETURN(const uint32_t version, cur_.Read<uint32_t>("the version"));
    if (version != 2 && version != 3) {
      const uint32_t swapped = __builtin_bswap32(version);
      if (swapped >= 1 && swapped <= 3) {
        return absl::UnimplementedError(absl::StrFormat(
            "unsupported version: big-endian GGUF (version field 0x%08x)", version));
      }
      return absl::UnimplementedError(absl::StrFormat(
          "unsupported version %d at offset 4 (this reader reads GGUF versions 2 and 3)",
          version));
    }
    f_->version_ = version;
    ASSIGN_OR_RETURN(*n_tensors, cur_.Read<uint64_t>("the tensor count"));
    ASSIGN_OR_RETURN(*n_kv, cur_.Read<uint64_t>("the metadata key count"));
    const uint64_t rest = cur_.remaining();
    if (*n_kv > rest / kMinKvBytes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "metadata key count %d at offset 16 cannot fit in the %d bytes after the header "
          "(each key needs at least %d bytes)", *n_kv, rest, kMinKvBytes));
    }
    if (*n_tensors > rest / kMinTensorInfoBytes ||
        *n_kv * kMinKvBytes + *n_tensors * kMinTensorInfoBytes > rest) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tensor count %d at offset 8 cannot fit in the %d bytes after the header "
          "(each tensor info needs at least %d bytes, and %d keys need %d)",
          *n_tensors, rest, kMinTensorInfoBytes, *n_kv, *n_kv * kMinKvBytes));
    }
    return absl::OkStatus();
  }

  absl::Status ParseKv(uint64_t i) {
    const uint64_t at = cur_.pos();
    ASSIGN_OR_RETURN(const std::string_view key_view,
                     cur_.ReadString(absl::StrCat("metadata key #", i)));
    std::string key(key_view);
    if (f_->kv_.contains(key)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("duplicate metadata key '%s' at offset %d", key, at));
    }
    ASSIGN_OR_RETURN(const uint32_t type,
                     cur_.Read<uint32_t>(absl::StrCat("the type of '", key, "'")));
    GgufValue value;
    RETURN_IF_ERROR(ParseValue(key, type, &value));
    if (key == "general.alignment") RETURN_IF_ERROR(SetAlignment(value));
    f_->key_order_.push_back(key);
    f_->kv_.emplace(std::move(key), std::move(value));
    return absl::OkStatus();
  }

  absl::Status SetAlignment(const GgufValue& v) {
    if (v.type != GgufValueType::kUint32) {
      return absl::InvalidArgumentError(absl::StrCat(
          "general.alignment must be a uint32, got ", A(GgufValueTypeName(v.type))));
    }
    const uint64_t a = std::get<uint64_t>(v.v);
    if (a == 0 || (a & (a - 1)) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("general.alignment ", a, " is not a power of two"));
    }
    f_->alignment_ = static_cast<uint32_t>(a);
    return absl::OkStatus();
  }

  absl::Status ParseValue(const std::string& key, uint32_t type, GgufValue* out) {
    const uint64_t at = cur_.pos();
    if (type == static_cast<uint32_t>(GgufValueType::kArray)) {
      out->type = GgufValueType::kArray;
      GgufArray arr;
      RETURN_IF_ERROR(ParseArray(key, &arr));
      out->v = std::move(arr);
      return absl::OkStatus();
    }
    if (ScalarBytes(type) == 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "unknown value type %d for metadata key '%s' at offset %d", type, key, at - 4));
    }
    const auto t = static_cast<GgufValueType>(type);
    out->type = t;
    if (t == GgufValueType::kString) {
      ASSIGN_OR_RETURN(const std::string_view s,
                       cur_.ReadString(absl::StrCat("string '", key, "'")));
      out->v = std::string(s);
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(cur_.Need(ScalarBytes(type), absl::StrCat("the value of '", key, "'")));
    if (IsFloatType(t)) {
      out->v = TakeFloat(t);
    } else if (t == GgufValueType::kBool) {
      out->v = TakeIntBits(t) != 0;
    } else if (IsSignedType(t)) {
      out->v = static_cast<int64_t>(TakeIntBits(t));
    } else {
      out->v = TakeIntBits(t);
    }
    return absl::OkStatus();
  }

  // Array: uint32 element type, uint64 count, then the elements. The count is
  // checked against the remaining bytes (at the element's minimum size) before
  // anything is reserved, which also covers every fixed-size element read.
  absl::Status ParseArray(const std::string& key, GgufArray* arr) {
    const uint64_t at = cur_.pos();
    ASSIGN_OR_RETURN(const uint32_t elem,
                     cur_.Read<uint32_t>(absl::StrCat("the element type of array '", key, "'")));
    ASSIGN_OR_RETURN(const uint64_t n,
                     cur_.Read<uint64_t>(absl::StrCat("the length of array '", key, "'")));
    if (elem == static_cast<uint32_t>(GgufValueType::kArray)) {
      return absl::UnimplementedError(absl::StrFormat(
          "metadata key '%s' at offset %d is a nested array (array of arrays), which this "
          "reader does not support", key, at));
    }
    const uint64_t esize = ScalarBytes(elem);
    if (esize == 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "unknown value type %d for the elements of array '%s' at offset %d", elem, key, at));
    }
    const auto t = static_cast<GgufValueType>(elem);
    if (n > cur_.remaining() / esize) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "array '%s' at offset %d claims %d elements of %s, past the end of the file "
          "(%d bytes remain)", key, at, n, GgufValueTypeName(t), cur_.remaining()));
    }
    arr->elem_type = t;
    const size_t count = static_cast<size_t>(n);
    if (t == GgufValueType::kString) {
      arr->strings.reserve(count);
      for (size_t i = 0; i < count; ++i) {
        auto s = cur_.ReadString("string");  // a fixed label: no formatting per element
        if (!s.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "element ", i, " of array '", key, "': ", s.status().message()));
        }
        arr->strings.emplace_back(*s);
      }
    } else if (IsFloatType(t)) {
      arr->floats.resize(count);
      for (size_t i = 0; i < count; ++i) arr->floats[i] = TakeFloat(t);
    } else {
      // uint64 elements are kept bit for bit (values above INT64_MAX wrap).
      arr->ints.resize(count);
      for (size_t i = 0; i < count; ++i) {
        const uint64_t bits = TakeIntBits(t);
        arr->ints[i] = t == GgufValueType::kBool ? (bits != 0) : static_cast<int64_t>(bits);
      }
    }
    return absl::OkStatus();
  }

  // An integer or bool field as 64 raw bits (sign-extended for signed types).
  uint64_t TakeIntBits(GgufValueType t) {
    switch (t) {
      case GgufValueType::kInt8: return static_cast<uint64_t>(int64_t{cur_.TakeScalar<int8_t>()});
      case GgufValueType::kInt16: return static_cast<uint64_t>(int64_t{cur_.TakeScalar<int16_t>()});
      case GgufValueType::kInt32: return static_cast<uint64_t>(int64_t{cur_.TakeScalar<int32_t>()});
      case GgufValueType::kUint16: return cur_.TakeScalar<uint16_t>();
      case GgufValueType::kUint32: return cur_.TakeScalar<uint32_t>();
      case GgufValueType::kUint64: case GgufValueType::kInt64: return cur_.TakeScalar<uint64_t>();
      default: return cur_.TakeScalar<uint8_t>();  // uint8, bool
    }
  }
  double TakeFloat(GgufValueType t) {
    return t == GgufValueType::kFloat32 ? cur_.TakeScalar<float>() : cur_.TakeScalar<double>();
  }

  // Tensor info: name, uint32 n_dims, int64 ne[n_dims], uint32 type, uint64
  // offset (relative to the data section). Shape and size are validated here;
  // placement once the data section's start is known.
  absl::Status ParseTensorInfo(uint64_t i) {
    const uint64_t at = cur_.pos();
    ASSIGN_OR_RETURN(const std::string_view name_view,
                     cur_.ReadString(absl::StrCat("the name of tensor #", i)));
    GgufTensor t;
    t.name = std::string(name_view);
    if (f_->tensor_index_.contains(t.name)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("duplicate tensor name '%s' at offset %d", t.name, at));
    }
    const std::string label = absl::StrCat("tensor '", t.name, "'");
    ASSIGN_OR_RETURN(const uint32_t n_dims, cur_.Read<uint32_t>(absl::StrCat("n_dims of ", label)));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s at offset %d has %d dimensions (n_dims must be 1..%d)", label, at, n_dims, kMaxDims));
    }
    t.n_dims = static_cast<int>(n_dims);
    int64_t nelements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      ASSIGN_OR_RETURN(const int64_t ne,
                       cur_.Read<int64_t>(absl::StrCat("ne[", d, "] of ", label)));
      if (ne <= 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s dimension ne[%d] is %d (dims must be > 0)", label, d, ne));
      }
      if (nelements > std::numeric_limits<int64_t>::max() / ne) {
        return absl::InvalidArgumentError(absl::StrCat(label, " element count overflows int64"));
      }
      nelements *= ne;
      t.ne[d] = ne;
    }
    ASSIGN_OR_RETURN(const uint32_t type, cur_.Read<uint32_t>(absl::StrCat("the type of ", label)));
    const std::optional<GgmlTypeTraits> traits = GetTypeTraits(type);
    if (!traits) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s has unknown ggml tensor type %d", label, type));
    }
    t.type = static_cast<GgmlType>(type);
    if (t.ne[0] % traits->block_size != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s row length ne[0] = %d is not a multiple of the %s block size %d", label, t.ne[0],
          traits->name, traits->block_size));
    }
    const int64_t nblocks = nelements / traits->block_size;
    if (nblocks > std::numeric_limits<int64_t>::max() / traits->block_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(label, " byte size overflows int64"));
    }
    t.nbytes = static_cast<uint64_t>(nblocks * traits->block_bytes);
    ASSIGN_OR_RETURN(t.offset, cur_.Read<uint64_t>(absl::StrCat("the data offset of ", label)));
    f_->tensor_index_.emplace(t.name, f_->tensors_.size());
    f_->tensors_.push_back(std::move(t));
    return absl::OkStatus();
  }

  // The data section starts at the first multiple of the alignment after the
  // tensor infos; each tensor's offset must be aligned and its bytes inside
  // the file. Overlaps and gaps between tensors are CheckDataLayout()'s.
  absl::Status PlaceTensorData() {
    const uint64_t size = f_->size_;
    const uint64_t align = f_->alignment_;
    const uint64_t data_start = (cur_.pos() + align - 1) / align * align;
    f_->data_start_ = data_start;
    for (GgufTensor& t : f_->tensors_) {
      if (t.offset % align != 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "tensor '%s' data offset %d is misaligned (not a multiple of the alignment %d)",
            t.name, t.offset, align));
      }
      if (data_start > size || t.offset > size - data_start ||
          t.nbytes > size - data_start - t.offset) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "tensor '%s' data (%d bytes at offset %d of the data section, which starts at %d) "
            "lies outside the file (%d bytes)", t.name, t.nbytes, t.offset, data_start, size));
      }
      t.data = f_->base_ + data_start + t.offset;
    }
    return absl::OkStatus();
  }

  GgufFile* f_;
  Cursor cur_;
};

size_t GgufArray::size() const {
  if (elem_type == GgufValueType::kString) return strings.size();
  if (IsFloatType(elem_type)) return floats.size();
  return ints.size();
}

size_t GgufTensor::row_bytes() const { return RowBytes(type, ne[0]); }

std::string GgufTensor::ShapeString() const {
  std::string out = "[";
  for (int d = n_dims - 1; d >= 0; --d) {
    absl::StrAppend(&out, ne[d], d > 0 ? ", " : "");
  }
  return out + "]";
}

std::string_view GgufValueTypeName(GgufValueType t) {
  const auto i = static_cast<uint32_t>(t);
  return i < kNumValueTypes ? kValueTypes[i].name : "unknown";
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  // O_NONBLOCK: a FIFO passed by mistake must not hang the open (it is then
  // refused as not a regular file); it has no effect on regular files.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat("cannot mmap ", path, ": ", std::strerror(err)));
    }
    f->base_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
  GgufParser parser(f.get());
  if (absl::Status s = parser.Parse(); !s.ok()) return WithPath(path, s);
  return f;
}

GgufFile::~GgufFile() {
  if (base_ != nullptr) ::munmap(const_cast<uint8_t*>(base_), size_);
}

bool GgufFile::Has(std::string_view key) const { return kv_.contains(A(key)); }

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = kv_.find(A(key));
  return it == kv_.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(A(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

absl::Status NotFound(std::string_view key) {
  return absl::NotFoundError(absl::StrCat("metadata key '", A(key), "' not found"));
}
absl::Status WrongType(std::string_view key, GgufValueType have, std::string_view want) {
  return absl::InvalidArgumentError(absl::StrCat(
      "metadata key '", A(key), "' has type ", A(GgufValueTypeName(have)), ", expected ", A(want)));
}

}  // namespace

absl::StatusOr<std::string> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return NotFound(key);
  if (v->type != GgufValueType::kString) return WrongType(key, v->type, "string");
  return std::get<std::string>(v->v);
}

absl::StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return NotFound(key);
  if (!IsIntegerType(v->type)) return WrongType(key, v->type, "an integer");
  if (const auto* u = std::get_if<uint64_t>(&v->v)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(
          absl::StrCat("metadata key '", A(key), "' value ", *u, " does not fit int64"));
    }
    return static_cast<int64_t>(*u);
  }
  return std::get<int64_t>(v->v);
}

absl::StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return NotFound(key);
  if (IsFloatType(v->type)) return std::get<double>(v->v);
  if (const auto* u = std::get_if<uint64_t>(&v->v)) return static_cast<double>(*u);
  if (IsIntegerType(v->type)) return static_cast<double>(std::get<int64_t>(v->v));
  return WrongType(key, v->type, "a float or an integer");
}

absl::StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return NotFound(key);
  if (v->type != GgufValueType::kBool) return WrongType(key, v->type, "bool");
  return std::get<bool>(v->v);
}

// The element type must match by kind rather than exactly: any integer type
// (all land in `ints`) for an integer request, float32 or float64 for a float
// request, so a converter's choice of uint32 over int32 does not matter.
absl::StatusOr<const GgufArray*> GgufFile::GetArray(std::string_view key,
                                                    GgufValueType elem_type) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return NotFound(key);
  const std::string want = absl::StrCat("array of ", A(GgufValueTypeName(elem_type)));
  if (v->type != GgufValueType::kArray) return WrongType(key, v->type, want);
  const GgufArray& a = std::get<GgufArray>(v->v);
  const bool ok = a.elem_type == elem_type ||
                  (IsIntegerType(a.elem_type) && IsIntegerType(elem_type)) ||
                  (IsFloatType(a.elem_type) && IsFloatType(elem_type));
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metadata key '", A(key), "' has type array of ", A(GgufValueTypeName(a.elem_type)),
        ", expected ", want));
  }
  return &a;
}

absl::StatusOr<int64_t> GgufFile::GetIntOr(std::string_view key, int64_t dflt) const {
  return Has(key) ? GetInt(key) : dflt;
}
absl::StatusOr<double> GgufFile::GetFloatOr(std::string_view key, double dflt) const {
  return Has(key) ? GetFloat(key) : dflt;
}
absl::StatusOr<bool> GgufFile::GetBoolOr(std::string_view key, bool dflt) const {
  return Has(key) ? GetBool(key) : dflt;
}

namespace {

constexpr size_t kDescribeMaxChars = 64;
constexpr size_t kDescribeMaxElems = 4;

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < kDescribeMaxChars; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') absl::StrAppend(&out, "\\", std::string(1, c));
    else if (c < 0x20 || c == 0x7f) absl::StrAppendFormat(&out, "\\x%02x", c);
    else out.push_back(static_cast<char>(c));
  }
  absl::StrAppend(&out, s.size() > kDescribeMaxChars ? "\"..." : "\"");
  return out;
}

}  // namespace

std::string GgufFile::Describe(const GgufValue& v) {
  switch (v.type) {
    case GgufValueType::kString: return Quote(std::get<std::string>(v.v));
    case GgufValueType::kBool: return std::get<bool>(v.v) ? "true" : "false";
    case GgufValueType::kFloat32: case GgufValueType::kFloat64:
      return absl::StrFormat("%g", std::get<double>(v.v));
    case GgufValueType::kArray: break;
    default:
      if (const auto* u = std::get_if<uint64_t>(&v.v)) return absl::StrCat(*u);
      return absl::StrCat(std::get<int64_t>(v.v));
  }
  const GgufArray& a = std::get<GgufArray>(v.v);
  std::string out = absl::StrCat("[", A(GgufValueTypeName(a.elem_type)), " x ", a.size(), "] {");
  const size_t n = std::min(a.size(), kDescribeMaxElems);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out += ", ";
    if (a.elem_type == GgufValueType::kString) out += Quote(a.strings[i]);
    else if (IsFloatType(a.elem_type)) absl::StrAppendFormat(&out, "%g", a.floats[i]);
    else absl::StrAppend(&out, a.ints[i]);
  }
  absl::StrAppend(&out, a.size() > n ? ", ...}" : "}");
  return out;
}

}  // namespace specserve
