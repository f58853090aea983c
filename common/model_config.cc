#include "common/model_config.h"

#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace specserve {
namespace {

absl::StatusOr<int32_t> PositiveInt(const GgufFile& f, const std::string& key,
                                    int64_t max_value) {
  ASSIGN_OR_RETURN(int64_t v, f.GetInt(key));
  if (v <= 0 || v > max_value) {
    return absl::InvalidArgumentError(
        absl::StrCat("metadata ", key, " = ", v, " is out of range (1..", max_value, ")"));
  }
  return static_cast<int32_t>(v);
}

// 1 / factor for linear scaling, as llama.cpp reads it: the type defaults to
// linear, and the factor comes from rope.scaling.factor or, in older files,
// rope.scale_linear. Other types (yarn, longrope) change more than the angle
// scale and are refused rather than run wrong.
absl::StatusOr<float> RopeFreqScale(const GgufFile& f, const std::string& p) {
  std::string type = "linear";
  if (f.Has(p + "rope.scaling.type")) {
    ASSIGN_OR_RETURN(type, f.GetString(p + "rope.scaling.type"));
  }
  if (type == "none") return 1.0f;
  if (type != "linear") {
    return absl::UnimplementedError(absl::StrCat(
        "metadata ", p, "rope.scaling.type = '", type,
        "' is not supported (supported: none, linear, and rope_freqs.weight factors)"));
  }
  double factor = 0.0;
  if (f.Has(p + "rope.scaling.factor")) {
    ASSIGN_OR_RETURN(factor, f.GetFloat(p + "rope.scaling.factor"));
  } else if (f.Has(p + "rope.scale_linear")) {
    ASSIGN_OR_RETURN(factor, f.GetFloat(p + "rope.scale_linear"));
  }
  if (factor == 0.0) return 1.0f;  // absent, or 0 as llama.cpp writes "no scaling"
  if (!(factor > 0.0 && factor < 1e6)) {
    return absl::InvalidArgumentError(
        absl::StrCat("metadata ", p, "rope.scaling.factor = ", factor, " is out of range"));
  }
  return static_cast<float>(1.0 / factor);
}

constexpr int64_t kMaxVocab = 1 << 22;

// The vocabulary size and where it came from: the tokenizer's token list,
// which <arch>.vocab_size must agree with when both are present; else that
// key; else (a file without a tokenizer) the rows of token_embd.
absl::StatusOr<std::pair<int32_t, std::string>> Vocab(const GgufFile& f, const std::string& p) {
  const std::string size_key = p + "vocab_size";
  if (f.Has("tokenizer.ggml.tokens")) {
    ASSIGN_OR_RETURN(const GgufArray* tokens,
                     f.GetArray("tokenizer.ggml.tokens", GgufValueType::kString));
    const int64_t n = static_cast<int64_t>(tokens->size());
    if (n <= 0 || n > kMaxVocab) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokenizer.ggml.tokens has ", n, " tokens (the vocabulary must have 1..", kMaxVocab, ")"));
    }
    if (f.Has(size_key)) {
      ASSIGN_OR_RETURN(const int64_t declared, f.GetInt(size_key));
      if (declared != n) {
        return absl::InvalidArgumentError(absl::StrCat(
            "metadata ", size_key, " = ", declared, " but tokenizer.ggml.tokens has ", n, " tokens"));
      }
    }
    return std::make_pair(static_cast<int32_t>(n),
                          absl::StrCat("the ", n, " tokens of tokenizer.ggml.tokens"));
  }
  if (f.Has(size_key)) {
    ASSIGN_OR_RETURN(const int32_t n, PositiveInt(f, size_key, kMaxVocab));
    return std::make_pair(n, absl::StrCat("metadata ", size_key, " = ", n));
  }
  const GgufTensor* embd = f.FindTensor("token_embd.weight");
  if (embd == nullptr) {
    return absl::InvalidArgumentError("missing required tensor token_embd.weight");
  }
  if (embd->ne[1] <= 0 || embd->ne[1] > kMaxVocab) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token_embd.weight has ", embd->ne[1], " rows, an absurd vocabulary size (the file has "
        "no tokenizer.ggml.tokens)"));
  }
  const auto n = static_cast<int32_t>(embd->ne[1]);
  return std::make_pair(n, absl::StrCat("the ", n, " rows of token_embd.weight (the file has no "
                                        "tokenizer.ggml.tokens)"));
}

}  // namespace

absl::StatusOr<ModelConfig> ModelConfig::FromGguf(const GgufFile& f) {
  ModelConfig c;
  ASSIGN_OR_RETURN(c.arch, f.GetString("general.architecture"));
  if (c.arch != "llama" && c.arch != "qwen2") {
    return absl::UnimplementedError(absl::StrCat(
        "unsupported architecture '", c.arch, "' (supported: llama, qwen2)"));
  }
  if (f.Has("general.name")) {
    ASSIGN_OR_RETURN(c.name, f.GetString("general.name"));
  }
  const std::string p = c.arch + ".";
  constexpr int64_t kMaxDim = 1 << 20;
  ASSIGN_OR_RETURN(c.n_embd, PositiveInt(f, p + "embedding_length", kMaxDim));
  ASSIGN_OR_RETURN(c.n_layer, PositiveInt(f, p + "block_count", 4096));
  ASSIGN_OR_RETURN(c.n_head, PositiveInt(f, p + "attention.head_count", 4096));
  c.n_head_kv = c.n_head;
  if (f.Has(p + "attention.head_count_kv")) {
    ASSIGN_OR_RETURN(c.n_head_kv, PositiveInt(f, p + "attention.head_count_kv", 4096));
  }
  ASSIGN_OR_RETURN(c.n_ff, PositiveInt(f, p + "feed_forward_length", kMaxDim));
  ASSIGN_OR_RETURN(c.n_ctx, PositiveInt(f, p + "context_length", 1 << 24));
  if (c.n_head % c.n_head_kv != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attention.head_count ", c.n_head, " is not a multiple of head_count_kv ", c.n_head_kv));
  }
  c.head_dim = c.n_embd / c.n_head;
  if (f.Has(p + "attention.key_length")) {
    ASSIGN_OR_RETURN(c.head_dim, PositiveInt(f, p + "attention.key_length", 4096));
  } else if (c.n_embd % c.n_head != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "embedding_length ", c.n_embd, " is not a multiple of head_count ", c.n_head));
  }
  if (f.Has(p + "attention.value_length")) {
    ASSIGN_OR_RETURN(const int32_t v_dim, PositiveInt(f, p + "attention.value_length", 4096));
    if (v_dim != c.head_dim) {
      return absl::UnimplementedError(absl::StrCat(
          "metadata ", p, "attention.value_length = ", v_dim, " differs from the key head size ",
          c.head_dim, " (", p, "attention.key_length or embedding_length / head_count): this "
          "engine needs value heads as wide as key heads"));
    }
  }
  if (c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("head dimension ", c.head_dim, " is odd"));
  }
  c.rope_dim = c.head_dim;
  if (f.Has(p + "rope.dimension_count")) {
    ASSIGN_OR_RETURN(c.rope_dim, PositiveInt(f, p + "rope.dimension_count", c.head_dim));
    if (c.rope_dim % 2 != 0) {
      return absl::InvalidArgumentError(absl::StrCat("rope.dimension_count ", c.rope_dim, " is odd"));
    }
  }
  ASSIGN_OR_RETURN(double base, f.GetFloatOr(p + "rope.freq_base", 10000.0));
  ASSIGN_OR_RETURN(double eps, f.GetFloatOr(p + "attention.layer_norm_rms_epsilon", 1e-5));
  if (!(base > 1.0) || !(eps > 0.0 && eps < 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rope.freq_base ", base, " or layer_norm_rms_epsilon ", eps, " out of range"));
  }
  c.rope_base = static_cast<float>(base);
  c.rms_eps = static_cast<float>(eps);
  ASSIGN_OR_RETURN(c.rope_freq_scale, RopeFreqScale(f, p));
  c.rope_neox = c.arch == "qwen2";
  c.qkv_bias = c.arch == "qwen2";
  ASSIGN_OR_RETURN(std::tie(c.vocab, c.vocab_source), Vocab(f, p));
  c.tied_output = f.FindTensor("output.weight") == nullptr;
  return c;
}

}  // namespace specserve
