// An EAGLE draft head (Li et al. 2024) as a model file: one Llama decoder
// layer over the target's own features. At position t its input is
// concat(embed(token[t+1]), f[t]), f[t] being the target's last-layer
// residual stream at t before the final RMSNorm (Backend::ForwardFeatures);
// fc [2 * n_embd -> n_embd], then RMSNorm, attention (interleaved-pair RoPE,
// its own KV cache), RMSNorm, SwiGLU, each added to the residual; the output
// h[t] is the predicted f[t+1], read out through the target's own final
// norm and output matrix (not stored in the head). The embedding is the
// target's token_embd. tools/train_eagle.py trains one; backends/cpu_eagle.h
// runs it.
//
// File: GGUF, general.architecture = "specserve-eagle", keys
//   specserve-eagle.{embedding_length, feed_forward_length, context_length,
//     attention.head_count, attention.head_count_kv,
//     attention.layer_norm_rms_epsilon, attention.sliding_window (optional),
//     rope.freq_base}
//   specserve-eagle.target.{embedding_length, vocab_size, fingerprint}
// and exactly the tensors fc.weight [n_embd, 2 * n_embd] (input: embedding
// first, then feature), blk.0.{attn_norm, ffn_norm}.weight [n_embd] F32, and
// blk.0.{attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up,
// ffn_down}.weight (F32 or F16) in the target's layout (common/weights.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/gguf.h"
#include "common/weights.h"

namespace specserve {

inline constexpr char kEagleArch[] = "specserve-eagle";

struct EagleHeadConfig {
  std::string name;          // general.name (informational)
  int32_t n_embd = 0;        // the target's n_embd (h is read out by the target)
  int32_t n_ff = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;      // n_embd / n_head
  int32_t n_ctx = 0;
  float rms_eps = 1e-5f;
  float rope_base = 10000.f;
  // Attention reaches the last `window` positions, the length of the
  // windows it was trained on (attention.sliding_window; 0 or absent: all).
  int32_t window = 0;
  // The target it was trained for.
  int32_t target_n_embd = 0;
  int32_t target_vocab = 0;
  std::string target_fingerprint;  // TargetFingerprint of that target

  int32_t kv_dim() const { return n_head_kv * head_dim; }
};

struct EagleHeadWeights {
  MatrixView fc;       // [n_embd, 2 * n_embd]
  LayerWeights layer;  // q_dim = n_embd, kv_dim, n_ff as the config says; no biases
};

// Identifies a target's readout: "<tensor> <type> [rows, cols] <checksum>"
// for output.weight (token_embd.weight when tied), the checksum being
// sum_i w[i] * (2i + 1) mod 2^64 over the tensor's bytes read as
// little-endian u64 words (zero-padded). Cheap, and any retrained or
// re-quantized target changes it.
std::string TargetFingerprint(const GgufFile& target);

// A head loaded for one target.
struct EagleHead {
  std::unique_ptr<GgufFile> file;
  EagleHeadConfig config;
  EagleHeadWeights weights;

  // Opens PATH and validates it as a head for TARGET: the architecture, the
  // keys, the exact tensor set and shapes, the data layout, and the target
  // metadata against TARGET's n_embd, vocabulary and fingerprint. Errors:
  // NOT_FOUND (cannot open), INVALID_ARGUMENT naming the key or tensor and
  // what was expected vs found (a truncated file fails in GgufFile::Open),
  // FAILED_PRECONDITION for a head trained for another target.
  static absl::StatusOr<std::unique_ptr<EagleHead>> Load(const std::string& path, const Model& target);
};

}  // namespace specserve
