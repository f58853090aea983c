#include "common/eagle_head.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace specserve {
namespace {

std::string Key(const char* suffix) { return absl::StrCat(kEagleArch, ".", suffix); }

absl::StatusOr<int32_t> PositiveInt(const GgufFile& f, const std::string& key, int64_t max_value) {
  ASSIGN_OR_RETURN(const int64_t v, f.GetInt(key));
  if (v <= 0 || v > max_value) {
    return absl::InvalidArgumentError(absl::StrCat("head metadata ", key, " = ", v, " is out of range (1..", max_value, ")"));
  }
  return static_cast<int32_t>(v);
}

// Missing keys are INVALID_ARGUMENT here: the file is not a valid head.
template <class T>
absl::StatusOr<T> Required(absl::StatusOr<T> v, const std::string& key) {
  if (absl::IsNotFound(v.status())) return absl::InvalidArgumentError(absl::StrCat("head file lacks metadata ", key));
  return v;
}

absl::StatusOr<EagleHeadConfig> ConfigFromGguf(const GgufFile& f) {
  auto arch = f.GetString("general.architecture");
  if (!arch.ok()) return absl::InvalidArgumentError("head file lacks general.architecture");
  if (*arch != kEagleArch) {
    return absl::InvalidArgumentError(absl::StrCat("general.architecture is '", *arch, "', expected '", kEagleArch,
                                                   "' (an EAGLE head file, common/eagle_head.h)"));
  }
  EagleHeadConfig c;
  if (f.Has("general.name")) {
    ASSIGN_OR_RETURN(c.name, f.GetString("general.name"));
  }
  constexpr int64_t kMaxDim = 1 << 16;
  ASSIGN_OR_RETURN(c.n_embd, Required(PositiveInt(f, Key("embedding_length"), kMaxDim), Key("embedding_length")));
  ASSIGN_OR_RETURN(c.n_ff, Required(PositiveInt(f, Key("feed_forward_length"), 1 << 18), Key("feed_forward_length")));
  ASSIGN_OR_RETURN(c.n_ctx, Required(PositiveInt(f, Key("context_length"), 1 << 24), Key("context_length")));
  ASSIGN_OR_RETURN(c.n_head, Required(PositiveInt(f, Key("attention.head_count"), 1024), Key("attention.head_count")));
  ASSIGN_OR_RETURN(c.n_head_kv,
                   Required(PositiveInt(f, Key("attention.head_count_kv"), 1024), Key("attention.head_count_kv")));
  if (c.n_embd % c.n_head != 0 || c.n_head % c.n_head_kv != 0) {
    return absl::InvalidArgumentError(absl::StrCat("head metadata: n_embd ", c.n_embd, ", heads ", c.n_head, "/",
                                                   c.n_head_kv, " do not divide"));
  }
  c.head_dim = c.n_embd / c.n_head;
  if (c.head_dim % 2 != 0) return absl::InvalidArgumentError("head metadata: the head size must be even (RoPE pairs)");
  ASSIGN_OR_RETURN(const double eps, f.GetFloatOr(Key("attention.layer_norm_rms_epsilon"), 1e-5));
  ASSIGN_OR_RETURN(const double base, f.GetFloatOr(Key("rope.freq_base"), 10000.0));
  if (!(eps > 0 && eps < 1) || !(base > 1)) return absl::InvalidArgumentError("head metadata: bad rms epsilon or rope base");
  ASSIGN_OR_RETURN(const int64_t window, f.GetIntOr(Key("attention.sliding_window"), 0));
  if (window < 0 || window > c.n_ctx) {
    return absl::InvalidArgumentError(absl::StrCat("head metadata ", Key("attention.sliding_window"), " = ", window,
                                                   " is out of range (0..", c.n_ctx, ")"));
  }
  c.window = static_cast<int32_t>(window);
  c.rms_eps = static_cast<float>(eps);
  c.rope_base = static_cast<float>(base);
  ASSIGN_OR_RETURN(c.target_n_embd,
                   Required(PositiveInt(f, Key("target.embedding_length"), kMaxDim), Key("target.embedding_length")));
  ASSIGN_OR_RETURN(c.target_vocab, Required(PositiveInt(f, Key("target.vocab_size"), 1 << 22), Key("target.vocab_size")));
  ASSIGN_OR_RETURN(c.target_fingerprint, Required(f.GetString(Key("target.fingerprint")), Key("target.fingerprint")));
  return c;
}

struct Expected {
  std::string name;
  int64_t rows, cols;  // cols == 0: a vector of `rows`
};

std::vector<Expected> ExpectedTensors(const EagleHeadConfig& c) {
  const int64_t d = c.n_embd;
  return {{"fc.weight", d, 2 * d},
          {"blk.0.attn_norm.weight", d, 0},
          {"blk.0.attn_q.weight", d, d},
          {"blk.0.attn_k.weight", c.kv_dim(), d},
          {"blk.0.attn_v.weight", c.kv_dim(), d},
          {"blk.0.attn_output.weight", d, d},
          {"blk.0.ffn_norm.weight", d, 0},
          {"blk.0.ffn_gate.weight", c.n_ff, d},
          {"blk.0.ffn_up.weight", c.n_ff, d},
          {"blk.0.ffn_down.weight", d, c.n_ff}};
}

// Checks every tensor's presence, shape and type, and that no other is there.
absl::Status CheckTensors(const GgufFile& f, const EagleHeadConfig& c) {
  const std::vector<Expected> want = ExpectedTensors(c);
  for (const GgufTensor& t : f.tensors()) {
    bool known = false;
    for (const Expected& e : want) known |= e.name == t.name;
    if (!known) return absl::InvalidArgumentError(absl::StrCat("head file has unexpected tensor ", t.name));
  }
  for (const Expected& e : want) {
    const GgufTensor* t = f.FindTensor(e.name);
    if (t == nullptr) return absl::InvalidArgumentError(absl::StrCat("head file lacks tensor ", e.name));
    const bool vec = e.cols == 0;
    const bool shape_ok = vec ? (t->n_dims == 1 && t->ne[0] == e.rows)
                              : (t->n_dims == 2 && t->ne[0] == e.cols && t->ne[1] == e.rows);
    if (!shape_ok) {
      return absl::InvalidArgumentError(absl::StrCat("head tensor ", e.name, " has shape ", t->ShapeString(),
                                                     " but the head's metadata needs ",
                                                     vec ? absl::StrCat("[", e.rows, "]")
                                                         : absl::StrCat("[", e.rows, ", ", e.cols, "]")));
    }
    const bool type_ok = vec ? t->type == GgmlType::kF32 : (t->type == GgmlType::kF32 || t->type == GgmlType::kF16);
    if (!type_ok) {
      return absl::InvalidArgumentError(absl::StrCat("head tensor ", e.name, " has type ",
                                                     std::string(GgmlTypeName(t->type)),
                                                     vec ? ", expected F32" : ", expected F32 or F16"));
    }
  }
  return f.CheckDataLayout();
}

MatrixView View(const GgufFile& f, const std::string& name) {
  const GgufTensor* t = f.FindTensor(name);
  return MatrixView{t->type, t->data, t->ne[1], t->ne[0], RowBytes(t->type, t->ne[0])};
}

const float* Vec(const GgufFile& f, const std::string& name) {
  return reinterpret_cast<const float*>(f.FindTensor(name)->data);
}

}  // namespace

std::string TargetFingerprint(const GgufFile& target) {
  const GgufTensor* t = target.FindTensor("output.weight");
  if (t == nullptr) t = target.FindTensor("token_embd.weight");
  if (t == nullptr) return "no readout tensor";
  uint64_t sum = 0;
  for (uint64_t i = 0; i * 8 < t->nbytes; ++i) {
    uint64_t w = 0;
    std::memcpy(&w, t->data + i * 8, std::min<uint64_t>(8, t->nbytes - i * 8));  // little-endian hosts
    sum += w * (2 * i + 1);
  }
  return absl::StrFormat("%s %s %s %016x", t->name, std::string(GgmlTypeName(t->type)), t->ShapeString(), sum);
}

absl::StatusOr<std::unique_ptr<EagleHead>> EagleHead::Load(const std::string& path, const Model& target) {
  auto head = std::make_unique<EagleHead>();
  ASSIGN_OR_RETURN(head->file, GgufFile::Open(path));
  const GgufFile& f = *head->file;
  auto in_file = [&](const absl::Status& s) { return absl::Status(s.code(), absl::StrCat(path, ": ", s.message())); };
  auto config = ConfigFromGguf(f);
  if (!config.ok()) return in_file(config.status());
  EagleHeadConfig& c = head->config = *config;
  const ModelConfig& tc = target.config;
  if (c.target_n_embd != tc.n_embd || c.target_vocab != tc.vocab) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": the head was trained for a target of n_embd ", c.target_n_embd, " and vocabulary ", c.target_vocab,
        ", but this target has n_embd ", tc.n_embd, " and vocabulary ", tc.vocab));
  }
  const std::string fp = TargetFingerprint(*target.file);
  if (c.target_fingerprint != fp) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": the head was trained for the target '",
                                                      c.target_fingerprint, "', not this one ('", fp, "')"));
  }
  if (c.n_embd != tc.n_embd) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the head's n_embd ", c.n_embd,
                                                   " differs from its target's ", tc.n_embd));
  }
  if (absl::Status s = CheckTensors(f, c); !s.ok()) return in_file(s);
  EagleHeadWeights& w = head->weights;
  w.fc = View(f, "fc.weight");
  w.layer.attn_norm = Vec(f, "blk.0.attn_norm.weight");
  w.layer.wq = View(f, "blk.0.attn_q.weight");
  w.layer.wk = View(f, "blk.0.attn_k.weight");
  w.layer.wv = View(f, "blk.0.attn_v.weight");
  w.layer.wo = View(f, "blk.0.attn_output.weight");
  w.layer.ffn_norm = Vec(f, "blk.0.ffn_norm.weight");
  w.layer.gate = View(f, "blk.0.ffn_gate.weight");
  w.layer.up = View(f, "blk.0.ffn_up.weight");
  w.layer.down = View(f, "blk.0.ffn_down.weight");
  return head;
}

}  // namespace specserve
