#include "common/weights.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace specserve {
namespace {

std::string Shape(int64_t a, int64_t b) { return absl::StrCat("[", a, ", ", b, "]"); }

absl::StatusOr<const GgufTensor*> Need(const GgufFile& f, const std::string& name) {
  const GgufTensor* t = f.FindTensor(name);
  if (t == nullptr) return absl::InvalidArgumentError("missing required tensor " + name);
  return t;
}

// rows x cols in row-major terms (GGUF ne = {cols, rows}).
absl::StatusOr<MatrixView> Matrix(const GgufFile& f, const std::string& name,
                                  int64_t rows, int64_t cols) {
  ASSIGN_OR_RETURN(const GgufTensor* t, Need(f, name));
  if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != 1 || t->ne[3] != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor ", name, " has shape ", Shape(t->ne[1], t->ne[0]), " but the config needs ",
        Shape(rows, cols)));
  }
  auto traits = GetTypeTraits(static_cast<uint32_t>(t->type));
  if (!traits || !traits->supported) {
    return absl::UnimplementedError(absl::StrCat(
        "tensor ", name, " has type ", std::string(GgmlTypeName(t->type)), ", which this engine cannot multiply"));
  }
  return MatrixView{t->type, t->data, rows, cols, RowBytes(t->type, cols)};
}

// A vector of n floats; widened into `owned` when stored in another type.
absl::StatusOr<const float*> Vector(const GgufFile& f, const std::string& name, int64_t n,
                                    ModelWeights& w) {
  ASSIGN_OR_RETURN(const GgufTensor* t, Need(f, name));
  if (t->nelements() != n || t->ne[0] != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor ", name, " has ", t->nelements(), " elements but the config needs ", n));
  }
  if (t->type == GgmlType::kF32) return reinterpret_cast<const float*>(t->data);
  auto traits = GetTypeTraits(static_cast<uint32_t>(t->type));
  if (!traits || !traits->supported || n % traits->block_size != 0) {
    return absl::UnimplementedError(
        absl::StrCat("tensor ", name, " has unsupported type ", std::string(GgmlTypeName(t->type))));
  }
  auto buf = std::make_unique<std::vector<float>>(n);
  DequantizeRow(t->type, t->data, buf->data(), n);
  w.owned.push_back(std::move(buf));
  return w.owned.back()->data();
}

}  // namespace

absl::StatusOr<ModelWeights> BindWeights(const GgufFile& f, const ModelConfig& c) {
  ModelWeights w;
  ASSIGN_OR_RETURN(w.tok_embd, Matrix(f, "token_embd.weight", c.vocab, c.n_embd));
  ASSIGN_OR_RETURN(w.output_norm, Vector(f, "output_norm.weight", c.n_embd, w));
  if (c.tied_output) {
    w.output = w.tok_embd;
  } else {
    ASSIGN_OR_RETURN(w.output, Matrix(f, "output.weight", c.vocab, c.n_embd));
  }
  if (f.FindTensor("rope_freqs.weight") != nullptr) {
    ASSIGN_OR_RETURN(w.rope_freqs, Vector(f, "rope_freqs.weight", c.rope_dim / 2, w));
    for (int i = 0; i < c.rope_dim / 2; ++i) {
      // A zero, negative or NaN divisor would turn every angle into NaN.
      if (!(w.rope_freqs[i] > 0.f && w.rope_freqs[i] < 1e30f)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tensor rope_freqs.weight[", i, "] = ", w.rope_freqs[i], " is not a positive factor"));
      }
    }
  }
  w.layers.resize(c.n_layer);
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string p = absl::StrCat("blk.", i, ".");
    LayerWeights& l = w.layers[i];
    ASSIGN_OR_RETURN(l.attn_norm, Vector(f, p + "attn_norm.weight", c.n_embd, w));
    ASSIGN_OR_RETURN(l.wq, Matrix(f, p + "attn_q.weight", c.q_dim(), c.n_embd));
    ASSIGN_OR_RETURN(l.wk, Matrix(f, p + "attn_k.weight", c.kv_dim(), c.n_embd));
    ASSIGN_OR_RETURN(l.wv, Matrix(f, p + "attn_v.weight", c.kv_dim(), c.n_embd));
    ASSIGN_OR_RETURN(l.wo, Matrix(f, p + "attn_output.weight", c.n_embd, c.q_dim()));
    if (c.qkv_bias) {
      ASSIGN_OR_RETURN(l.bq, Vector(f, p + "attn_q.bias", c.q_dim(), w));
      ASSIGN_OR_RETURN(l.bk, Vector(f, p + "attn_k.bias", c.kv_dim(), w));
      ASSIGN_OR_RETURN(l.bv, Vector(f, p + "attn_v.bias", c.kv_dim(), w));
    }
    ASSIGN_OR_RETURN(l.ffn_norm, Vector(f, p + "ffn_norm.weight", c.n_embd, w));
    ASSIGN_OR_RETURN(l.gate, Matrix(f, p + "ffn_gate.weight", c.n_ff, c.n_embd));
    ASSIGN_OR_RETURN(l.up, Matrix(f, p + "ffn_up.weight", c.n_ff, c.n_embd));
    ASSIGN_OR_RETURN(l.down, Matrix(f, p + "ffn_down.weight", c.n_embd, c.n_ff));
  }
  return w;
}

absl::StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& path) {
  auto m = std::make_unique<Model>();
  ASSIGN_OR_RETURN(m->file, GgufFile::Open(path));
  ASSIGN_OR_RETURN(m->config, ModelConfig::FromGguf(*m->file));
  ASSIGN_OR_RETURN(m->weights, BindWeights(*m->file, m->config));
  return m;
}

int64_t Model::ParameterCount() const {
  int64_t n = 0;
  for (const GgufTensor& t : file->tensors()) n += t.nelements();
  return n;
}

}  // namespace specserve
