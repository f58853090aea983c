// Hyper-parameters of a decoder-only transformer, read from GGUF metadata.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/gguf.h"

namespace specserve {

struct ModelConfig {
  std::string arch;          // general.architecture: "llama" or "qwen2"
  std::string name;          // general.name (informational)
  // Tokens: the length of tokenizer.ggml.tokens, else <arch>.vocab_size,
  // else the rows of token_embd (a file without a tokenizer). token_embd
  // and output must have exactly this many rows.
  int32_t vocab = 0;
  std::string vocab_source;  // where `vocab` came from, for error messages
  int32_t n_embd = 0;        // residual width d
  int32_t n_layer = 0;
  int32_t n_head = 0;        // query heads
  int32_t n_head_kv = 0;     // key/value heads (GQA: n_head % n_head_kv == 0)
  // n_embd / n_head unless attention.key_length says otherwise; the value
  // heads have the same size (attention.value_length may only repeat it).
  int32_t head_dim = 0;
  int32_t n_ff = 0;          // feed-forward hidden width
  int32_t n_ctx = 0;         // context length the model was trained for
  int32_t rope_dim = 0;      // rotated dims per head (== head_dim here)
  float rope_base = 10000.f;
  // Linear RoPE scaling from *.rope.scaling.{type,factor} (or the older
  // *.rope.scale_linear): angles times 1 / factor. 1 when the file has none.
  // Llama 3.1's per-frequency factors are a tensor (ModelWeights::rope_freqs).
  float rope_freq_scale = 1.f;
  float rms_eps = 1e-5f;
  bool rope_neox = false;    // rotate-half pairs (i, i+d/2) instead of (2i, 2i+1)
  bool tied_output = true;   // no output.weight: logits use token_embd
  bool qkv_bias = false;     // qwen2: biases on q/k/v projections

  int32_t q_dim() const { return n_head * head_dim; }
  int32_t kv_dim() const { return n_head_kv * head_dim; }

  // Validates every field it reads (types, ranges, divisibility, the token
  // count against <arch>.vocab_size) and names the key at fault. The
  // tensors are checked against the config by BindWeights.
  static absl::StatusOr<ModelConfig> FromGguf(const GgufFile& f);
};

}  // namespace specserve
