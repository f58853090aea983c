#include "common/weights.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
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

// A tensor the architecture uses: its shape in ggml order (ne, innermost
// first) and the shape's meaning, outermost first as messages print it.
struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> ne;
  std::string dims;
  bool required = true;
};

std::string RowMajor(const std::vector<int64_t>& ne) {
  std::string out = "[";
  for (size_t d = ne.size(); d-- > 0;) absl::StrAppend(&out, ne[d], d > 0 ? ", " : "");
  return out + "]";
}

std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& c) {
  const int64_t d = c.n_embd, v = c.vocab, q = c.q_dim(), kv = c.kv_dim(), ff = c.n_ff;
  std::vector<ExpectedTensor> out = {
      {"token_embd.weight", {d, v}, "[vocab, n_embd]"},
      {"output_norm.weight", {d}, "[n_embd]"},
      {"output.weight", {d, v}, "[vocab, n_embd]", /*required=*/false},
      {"rope_freqs.weight", {c.rope_dim / 2}, "[rope dimension_count / 2]", false},
  };
  const std::string q_dims = "n_head * head_dim", kv_dims = "n_head_kv * head_dim";
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string p = absl::StrCat("blk.", i, ".");
    out.push_back({p + "attn_norm.weight", {d}, "[n_embd]"});
    out.push_back({p + "attn_q.weight", {d, q}, "[" + q_dims + ", n_embd]"});
    out.push_back({p + "attn_k.weight", {d, kv}, "[" + kv_dims + ", n_embd]"});
    out.push_back({p + "attn_v.weight", {d, kv}, "[" + kv_dims + ", n_embd]"});
    if (c.qkv_bias) {
      out.push_back({p + "attn_q.bias", {q}, "[" + q_dims + "]"});
      out.push_back({p + "attn_k.bias", {kv}, "[" + kv_dims + "]"});
      out.push_back({p + "attn_v.bias", {kv}, "[" + kv_dims + "]"});
    }
    out.push_back({p + "attn_output.weight", {q, d}, "[n_embd, " + q_dims + "]"});
    out.push_back({p + "ffn_norm.weight", {d}, "[n_embd]"});
    out.push_back({p + "ffn_gate.weight", {d, ff}, "[n_ff, n_embd]"});
    out.push_back({p + "ffn_up.weight", {d, ff}, "[n_ff, n_embd]"});
    out.push_back({p + "ffn_down.weight", {ff, d}, "[n_embd, n_ff]"});
  }
  return out;
}

bool SameShape(const GgufTensor& t, const std::vector<int64_t>& ne) {
  for (size_t d = 0; d < t.ne.size(); ++d) {
    if (t.ne[d] != (d < ne.size() ? ne[d] : 1)) return false;
  }
  return true;
}

// The config values a shape message quotes.
std::string ConfigSummary(const ModelConfig& c) {
  return absl::StrCat("n_embd ", c.n_embd, ", n_head ", c.n_head, ", n_head_kv ", c.n_head_kv,
                      ", head_dim ", c.head_dim, ", n_ff ", c.n_ff, ", vocab ", c.vocab, " from ",
                      c.vocab_source);
}

// blk.N.* must be N in 0 .. n_layer - 1, every one of them present.
absl::Status CheckLayers(const GgufFile& f, const ModelConfig& c) {
  const std::string key = c.arch + ".block_count";
  int64_t max_layer = -1;
  const GgufTensor* max_tensor = nullptr;
  for (const GgufTensor& t : f.tensors()) {
    if (!absl::StartsWith(t.name, "blk.")) continue;
    const size_t dot = t.name.find('.', 4);
    int64_t layer = -1;
    const std::string digits = t.name.substr(4, dot == std::string::npos ? std::string::npos : dot - 4);
    if (dot == std::string::npos || digits.empty() ||
        digits.find_first_not_of("0123456789") != std::string::npos ||
        !absl::SimpleAtoi(digits, &layer)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", t.name, " has no layer number (expected blk.N.<name> with N in 0..",
          c.n_layer - 1, ")"));
    }
    if (layer > max_layer) {
      max_layer = layer;
      max_tensor = &t;
    }
  }
  // As unsigned: -1 (no layer) gives 0, a huge layer number cannot overflow.
  const uint64_t n_present = static_cast<uint64_t>(max_layer) + 1;
  const std::string have = absl::StrCat("the file has tensors for ", n_present, " layers");
  if (max_layer >= c.n_layer) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor ", max_tensor->name, " is for layer ", max_layer, ", but metadata ", key, " = ",
        c.n_layer, " (layers 0..", c.n_layer - 1, "); ", have, " (blk.0 .. blk.", max_layer, ")"));
  }
  if (max_layer + 1 < c.n_layer) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metadata ", key, " = ", c.n_layer, " but ", have,
        max_layer >= 0 ? absl::StrCat(" (blk.0 .. blk.", max_layer, ")") : std::string(),
        ": no tensor blk.", n_present, ".*"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateModelTensors(const GgufFile& f, const ModelConfig& c) {
  // Types first: an unsupported one is a missing feature, not a broken file.
  for (const GgufTensor& t : f.tensors()) {
    auto traits = GetTypeTraits(static_cast<uint32_t>(t.type));
    if (!traits || !traits->supported) {
      return absl::UnimplementedError(absl::StrCat(
          "tensor ", t.name, " has type ", std::string(GgmlTypeName(t.type)),
          ", which this engine cannot multiply"));
    }
  }
  RETURN_IF_ERROR(CheckLayers(f, c));
  const std::vector<ExpectedTensor> expected = ExpectedTensors(c);
  absl::flat_hash_set<std::string> known;
  for (const ExpectedTensor& e : expected) {
    known.insert(e.name);
    const GgufTensor* t = f.FindTensor(e.name);
    if (t == nullptr) {
      if (!e.required) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          "missing required tensor ", e.name, " (expected shape ", RowMajor(e.ne), " = ", e.dims,
          ")"));
    }
    if (!SameShape(*t, e.ne)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", e.name, " has shape ", t->ShapeString(), " but the config needs ",
          RowMajor(e.ne), " = ", e.dims, " (", ConfigSummary(c), ")"));
    }
  }
  for (const GgufTensor& t : f.tensors()) {
    if (!known.contains(t.name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unexpected tensor ", t.name, ": the ", c.arch, " architecture",
          c.qkv_bias ? "" : " (no q/k/v biases)", " with ", c.n_layer,
          " layers has no tensor of that name"));
    }
  }
  return f.CheckDataLayout();
}

absl::StatusOr<ModelWeights> BindWeights(const GgufFile& f, const ModelConfig& c) {
  RETURN_IF_ERROR(ValidateModelTensors(f, c));
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
