// An inflated model (tools/inflate.h) as a standard GGUF v3 file, in F16,
// Q8_0 or llama.cpp's Q4_K_M mix, quantized here (common/quantize.h).
// (Header-only, as tools/inflate.h: tools/*.cc all go into the CLI.)
//
// The metadata is the small file's (tokenizer included) with the shape keys,
// the RMSNorm epsilon, general.name and general.file_type replaced, and
// <arch>.attention.key_length / value_length added when n_embd is not
// heads x head_dim. Tensors are written in llama.cpp's order (token_embd,
// rope_freqs, output_norm, output, then each block), one at a time: the
// inflated F16 model plus one tensor's encoding is all that is in memory.
//
// Q4_K_M, as llama.cpp's llama_tensor_get_type picks it for a dense Llama
// with its own output matrix:
//   output.weight                                  Q6_K
//   attn_v and ffn_down of layer i when UseMoreBits(i, n_layer)  Q6_K
//   every other matrix (token_embd included)       Q4_K
// and a matrix whose rows are not a multiple of 256 falls back as llama.cpp's
// does: Q4_K -> Q5_0, Q6_K -> Q8_0 (and anything -> F16 when the rows are not
// a multiple of 32). Norm gains and rope_freqs stay F32.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/gguf.h"
#include "common/gguf_writer.h"
#include "common/quantize.h"
#include "common/status_macros.h"
#include "common/tensor_types.h"
#include "common/thread_pool.h"
#include "tools/inflate.h"

namespace specserve::inflate {

enum class FileType { kF16, kQ8_0, kQ4_K_M };

struct FileTypeInfo {
  std::string_view flag;  // --type value
  uint32_t ftype;         // general.file_type (llama.cpp's LLAMA_FTYPE_MOSTLY_*)
};
inline FileTypeInfo Info(FileType t) {
  switch (t) {
    case FileType::kF16: return {"f16", 1};
    case FileType::kQ8_0: return {"q8_0", 7};
    case FileType::kQ4_K_M: return {"q4_k_m", 15};
  }
  return {"?", 0};
}

inline absl::StatusOr<FileType> ParseFileType(const std::string& s) {
  for (FileType t : {FileType::kF16, FileType::kQ8_0, FileType::kQ4_K_M}) {
    if (s == Info(t).flag) return t;
  }
  return absl::InvalidArgumentError(absl::StrCat("--type '", s, "' is not one of f16, q8_0, q4_k_m"));
}

// llama.cpp's use_more_bits: the first and last eighth of the layers and
// every third one between.
inline bool UseMoreBits(int32_t i, int32_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// The type matrix ROLE ("output", "token_embd", "attn_v", ...) of layer
// LAYER (-1 outside the blocks) with COLS per row is stored in.
inline GgmlType MatrixType(FileType ft, std::string_view role, int32_t layer, int32_t n_layer, int64_t cols) {
  GgmlType t = GgmlType::kF16;
  if (ft == FileType::kQ8_0) t = GgmlType::kQ8_0;
  if (ft == FileType::kQ4_K_M) {
    const bool more = role == "output" || ((role == "attn_v" || role == "ffn_down") && UseMoreBits(layer, n_layer));
    t = more ? GgmlType::kQ6_K : GgmlType::kQ4_K;
    if (cols % 256 != 0) t = t == GgmlType::kQ6_K ? GgmlType::kQ8_0 : GgmlType::kQ5_0;
  }
  if (t != GgmlType::kF16 && cols % 32 != 0) t = GgmlType::kF16;
  return t;
}

// One tensor of the file: a matrix of the inflated model or an F32 vector.
struct FileTensor {
  std::string name;
  GgmlType type = GgmlType::kF32;  // as stored
  MatrixView matrix;               // [rows, cols] when vec is null
  const float* vec = nullptr;      // [n]
  int64_t n = 0;
  std::vector<int64_t> ne() const { return vec ? std::vector<int64_t>{n} : std::vector<int64_t>{matrix.cols, matrix.rows}; }
};

inline std::vector<FileTensor> FileTensors(const Inflated& big, FileType ft) {
  const ModelConfig& c = big.model.config;
  const ModelWeights& w = big.model.weights;
  std::vector<FileTensor> out;
  auto matrix = [&](std::string name, std::string_view role, int32_t layer, const MatrixView& m) {
    out.push_back({std::move(name), MatrixType(ft, role, layer, c.n_layer, m.cols), m, nullptr, 0});
  };
  auto vec = [&](std::string name, const float* v, int64_t n) {
    out.push_back({std::move(name), GgmlType::kF32, {}, v, n});
  };
  matrix("token_embd.weight", "token_embd", -1, w.tok_embd);
  if (w.rope_freqs != nullptr) vec("rope_freqs.weight", w.rope_freqs, c.rope_dim / 2);
  vec("output_norm.weight", w.output_norm, c.n_embd);
  matrix("output.weight", "output", -1, w.output);
  for (int32_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = w.layers[l];
    const std::string p = absl::StrCat("blk.", l, ".");
    vec(p + "attn_norm.weight", L.attn_norm, c.n_embd);
    matrix(p + "attn_q.weight", "attn_q", l, L.wq);
    matrix(p + "attn_k.weight", "attn_k", l, L.wk);
    matrix(p + "attn_v.weight", "attn_v", l, L.wv);
    matrix(p + "attn_output.weight", "attn_output", l, L.wo);
    vec(p + "ffn_norm.weight", L.ffn_norm, c.n_embd);
    matrix(p + "ffn_gate.weight", "ffn_gate", l, L.gate);
    matrix(p + "ffn_up.weight", "ffn_up", l, L.up);
    matrix(p + "ffn_down.weight", "ffn_down", l, L.down);
  }
  return out;
}

// T's bytes as stored: rows quantized from the model's F16 in parallel.
inline std::vector<uint8_t> EncodeTensor(const FileTensor& t, ThreadPool& pool) {
  if (t.vec != nullptr) {
    std::vector<uint8_t> out(static_cast<size_t>(t.n) * 4);
    QuantizeRow(GgmlType::kF32, t.vec, out.data(), t.n);
    return out;
  }
  const MatrixView& m = t.matrix;
  const uint64_t row_bytes = RowBytes(t.type, m.cols);
  std::vector<uint8_t> out(static_cast<size_t>(row_bytes * m.rows));
  if (t.type == m.type) {  // F16 to F16: the bits as they are
    for (int64_t r = 0; r < m.rows; ++r) std::memcpy(out.data() + r * row_bytes, m.row(r), row_bytes);
    return out;
  }
  pool.ParallelFor(m.rows, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(m.cols));
    for (int64_t r = begin; r < end; ++r) {
      DequantizeRow(m.type, m.row(r), row.data(), m.cols);
      QuantizeRow(t.type, row.data(), out.data() + r * row_bytes, m.cols);
    }
  });
  return out;
}

// Writes BIG (inflated from the model in SMALL) to PATH as file type FT,
// through PATH.tmp renamed at the end, so PATH is complete or absent.
inline absl::Status WriteInflatedGguf(const GgufFile& small, const Inflated& big, FileType ft, const std::string& path,
                                      int threads) {
  const ModelConfig& c = big.model.config;
  GgufWriter w;
  for (const std::string& k : small.keys()) w.Set(k, *small.Find(k));
  const std::string p = c.arch + ".";
  w.SetString("general.name", c.name);
  w.SetU32("general.file_type", Info(ft).ftype);
  if (ft != FileType::kF16) w.SetU32("general.quantization_version", 2);
  w.SetU32(p + "embedding_length", static_cast<uint32_t>(c.n_embd));
  w.SetU32(p + "block_count", static_cast<uint32_t>(c.n_layer));
  w.SetU32(p + "feed_forward_length", static_cast<uint32_t>(c.n_ff));
  w.SetU32(p + "attention.head_count", static_cast<uint32_t>(c.n_head));
  w.SetU32(p + "attention.head_count_kv", static_cast<uint32_t>(c.n_head_kv));
  w.SetF32(p + "attention.layer_norm_rms_epsilon", c.rms_eps);
  if (c.n_embd != c.n_head * c.head_dim || w.Has(p + "attention.key_length")) {
    w.SetU32(p + "attention.key_length", static_cast<uint32_t>(c.head_dim));
    w.SetU32(p + "attention.value_length", static_cast<uint32_t>(c.head_dim));
  }
  const std::vector<FileTensor> tensors = FileTensors(big, ft);
  for (const FileTensor& t : tensors) RETURN_IF_ERROR(w.AddTensor(t.name, t.type, t.ne()));
  const std::string tmp = path + ".tmp";
  RETURN_IF_ERROR(w.Open(tmp));
  ThreadPool pool(std::max(1, threads));
  for (const FileTensor& t : tensors) {
    const std::vector<uint8_t> bytes = EncodeTensor(t, pool);
    RETURN_IF_ERROR(w.WriteTensor(bytes.data(), bytes.size()));
  }
  RETURN_IF_ERROR(w.Close());
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

}  // namespace specserve::inflate
