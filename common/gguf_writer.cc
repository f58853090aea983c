#include "common/gguf_writer.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace specserve {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF"
constexpr uint32_t kVersion = 3;

// One integer or float element of type T from the reader's decoded forms
// (integers as their 64 raw bits, floats as double).
void PutInt(ByteWriter& w, GgufValueType t, uint64_t bits) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool: w.U8(static_cast<uint8_t>(bits)); return;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16: w.U16(static_cast<uint16_t>(bits)); return;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32: w.U32(static_cast<uint32_t>(bits)); return;
    default: w.U64(bits); return;
  }
}
void PutFloat(ByteWriter& w, GgufValueType t, double v) {
  if (t == GgufValueType::kFloat32) {
    w.F32(static_cast<float>(v));
  } else {
    w.F64(v);
  }
}
bool IsFloat(GgufValueType t) { return t == GgufValueType::kFloat32 || t == GgufValueType::kFloat64; }

}  // namespace

std::string EncodeGgufValue(const GgufValue& v) {
  ByteWriter w;
  if (v.type == GgufValueType::kArray) {
    const GgufArray& a = std::get<GgufArray>(v.v);
    w.U32(static_cast<uint32_t>(a.elem_type)).U64(a.size());
    if (a.elem_type == GgufValueType::kString) {
      for (const std::string& s : a.strings) w.Str(s);
    } else if (IsFloat(a.elem_type)) {
      for (double x : a.floats) PutFloat(w, a.elem_type, x);
    } else {
      for (int64_t x : a.ints) PutInt(w, a.elem_type, static_cast<uint64_t>(x));
    }
  } else if (v.type == GgufValueType::kString) {
    w.Str(std::get<std::string>(v.v));
  } else if (IsFloat(v.type)) {
    PutFloat(w, v.type, std::get<double>(v.v));
  } else if (v.type == GgufValueType::kBool) {
    w.U8(std::get<bool>(v.v) ? 1 : 0);
  } else if (const auto* u = std::get_if<uint64_t>(&v.v)) {
    PutInt(w, v.type, *u);
  } else {
    PutInt(w, v.type, static_cast<uint64_t>(std::get<int64_t>(v.v)));
  }
  return w.bytes();
}

GgufWriter::~GgufWriter() {
  if (f_ != nullptr) std::fclose(f_);
}

void GgufWriter::Set(std::string_view key, const GgufValue& v) {
  ByteWriter w;
  w.U32(static_cast<uint32_t>(v.type)).Raw(EncodeGgufValue(v));
  if (key == "general.alignment" && v.type == GgufValueType::kUint32) alignment_ = std::get<uint64_t>(v.v);
  for (auto& [k, bytes] : kvs_) {
    if (k == key) {
      bytes = w.bytes();
      return;
    }
  }
  kvs_.emplace_back(std::string(key), w.bytes());
}
void GgufWriter::SetU32(std::string_view key, uint32_t v) { Set(key, {GgufValueType::kUint32, uint64_t{v}}); }
void GgufWriter::SetI32(std::string_view key, int32_t v) { Set(key, {GgufValueType::kInt32, int64_t{v}}); }
void GgufWriter::SetF32(std::string_view key, float v) { Set(key, {GgufValueType::kFloat32, double{v}}); }
void GgufWriter::SetString(std::string_view key, std::string_view v) {
  Set(key, {GgufValueType::kString, std::string(v)});
}
bool GgufWriter::Has(std::string_view key) const {
  for (const auto& kv : kvs_) {
    if (kv.first == key) return true;
  }
  return false;
}

absl::Status GgufWriter::AddTensor(std::string_view name_view, GgmlType type, std::vector<int64_t> ne) {
  const std::string name(name_view);
  const auto traits = GetTypeTraits(static_cast<uint32_t>(type));
  if (!traits || ne.empty() || ne.size() > 4) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", name, ": bad type or ", ne.size(), " dims"));
  }
  uint64_t rows = 1;
  for (size_t d = 1; d < ne.size(); ++d) rows *= static_cast<uint64_t>(ne[d]);
  if (ne[0] <= 0 || ne[0] % traits->block_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", name, ": row length ", ne[0],
                                                   " is not a multiple of the ", std::string(traits->name),
                                                   " block size ", traits->block_size));
  }
  TensorInfo t{name, type, std::move(ne), 0, 0};
  t.nbytes = rows * RowBytes(type, t.ne[0]);
  if (!tensors_.empty()) {
    const TensorInfo& p = tensors_.back();
    t.offset = (p.offset + p.nbytes + alignment_ - 1) / alignment_ * alignment_;
  }
  tensors_.push_back(std::move(t));
  return absl::OkStatus();
}

absl::Status GgufWriter::Write(const void* p, size_t n) {
  if (n != 0 && std::fwrite(p, 1, n, f_) != n) {
    return absl::InternalError(absl::StrCat("writing ", path_, ": ", std::strerror(errno)));
  }
  pos_ += n;
  return absl::OkStatus();
}

absl::Status GgufWriter::Pad(uint64_t to) {
  static const char kZeros[256] = {};
  while (pos_ < to) RETURN_IF_ERROR(Write(kZeros, static_cast<size_t>(std::min<uint64_t>(to - pos_, 256))));
  return absl::OkStatus();
}

absl::Status GgufWriter::Open(const std::string& path) {
  if (f_ != nullptr) return absl::FailedPreconditionError("GgufWriter::Open called twice");
  if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("general.alignment ", alignment_, " is not a power of two"));
  }
  path_ = path;
  f_ = std::fopen(path.c_str(), "wb");
  if (f_ == nullptr) return absl::NotFoundError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  ByteWriter w;
  w.U32(kMagic).U32(kVersion).U64(tensors_.size()).U64(kvs_.size());
  for (const auto& [key, bytes] : kvs_) w.Str(key).Raw(bytes);
  for (const TensorInfo& t : tensors_) {
    w.Str(t.name).U32(static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) w.I64(d);
    w.U32(static_cast<uint32_t>(t.type)).U64(t.offset);
  }
  w.PadTo(alignment_);
  data_start_ = w.size();
  return Write(w.bytes().data(), w.size());
}

absl::Status GgufWriter::WriteTensor(const void* data, uint64_t nbytes) {
  if (f_ == nullptr) return absl::FailedPreconditionError("GgufWriter::WriteTensor before Open");
  if (next_tensor_ >= tensors_.size()) return absl::FailedPreconditionError("GgufWriter: more tensors than added");
  const TensorInfo& t = tensors_[next_tensor_];
  if (nbytes != t.nbytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", t.name, ": ", nbytes, " bytes given, ", t.nbytes, " expected"));
  }
  RETURN_IF_ERROR(Pad(data_start_ + t.offset));
  RETURN_IF_ERROR(Write(data, static_cast<size_t>(nbytes)));
  ++next_tensor_;
  return absl::OkStatus();
}

absl::Status GgufWriter::Close() {
  if (f_ == nullptr) return absl::FailedPreconditionError("GgufWriter::Close before Open");
  if (next_tensor_ != tensors_.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("GgufWriter: ", next_tensor_, " of ", tensors_.size(), " tensors written"));
  }
  // Pad the file to the alignment, as ggml's writer does.
  RETURN_IF_ERROR(Pad((pos_ + alignment_ - 1) / alignment_ * alignment_));
  const bool ok = std::fclose(f_) == 0;
  f_ = nullptr;
  if (!ok) return absl::InternalError(absl::StrCat("closing ", path_, ": ", std::strerror(errno)));
  return absl::OkStatus();
}

}  // namespace specserve
