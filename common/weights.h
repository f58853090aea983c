// Non-owning views of a model's weights inside the memory-mapped GGUF file
// (llama2.c's TransformerWeights, with a type per matrix so quantized files
// are read in place).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf.h"
#include "common/model_config.h"
#include "common/tensor_types.h"

namespace specserve {

// A matrix W [rows, cols] stored row-major in ggml blocks: y = W x computes
// y[r] = dot(row r, x). For a GGUF tensor, cols = ne[0] and rows = ne[1].
struct MatrixView {
  GgmlType type = GgmlType::kF32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  uint64_t row_bytes = 0;
  // Q8_0, Q4_K and Q6_K, when the CPU backend runs int8 activations: the same
  // matrix repacked for the int8 kernel (kernels/cpu_matmul_packed.h), owned
  // by the backend; nullptr otherwise.
  const uint8_t* packed = nullptr;
  const uint8_t* row(int64_t r) const { return data + r * row_bytes; }
};

struct LayerWeights {
  const float* attn_norm = nullptr;  // [n_embd]
  MatrixView wq;                     // [q_dim, n_embd]
  MatrixView wk;                     // [kv_dim, n_embd]
  MatrixView wv;                     // [kv_dim, n_embd]
  MatrixView wo;                     // [n_embd, q_dim]
  const float* bq = nullptr;         // [q_dim]  (qwen2 only)
  const float* bk = nullptr;         // [kv_dim] (qwen2 only)
  const float* bv = nullptr;         // [kv_dim] (qwen2 only)
  const float* ffn_norm = nullptr;   // [n_embd]
  MatrixView gate;                   // [n_ff, n_embd]
  MatrixView up;                     // [n_ff, n_embd]
  MatrixView down;                   // [n_embd, n_ff]
};

struct ModelWeights {
  MatrixView tok_embd;               // [vocab, n_embd]
  std::vector<LayerWeights> layers;  // [n_layer]
  const float* output_norm = nullptr;// [n_embd]
  MatrixView output;                 // [vocab, n_embd] (== tok_embd when tied)
  // Llama 3.1 RoPE frequency divisors, shared by every layer; nullptr when
  // the file has no rope_freqs.weight.
  const float* rope_freqs = nullptr; // [rope_dim / 2]
  // Vectors stored as F16/BF16 in the file are widened once into here.
  std::vector<std::unique_ptr<std::vector<float>>> owned;
};

// Checks the file's tensors against the config, before anything is bound:
//  - every tensor has a type this engine can run (UNIMPLEMENTED naming the
//    tensor and the type otherwise);
//  - the layers present (blk.N.*) are exactly 0 .. block_count - 1;
//  - every tensor the architecture needs is present, with exactly the shape
//    the config implies (vocab, n_embd, heads x head size, n_ff; qwen2's
//    q/k/v biases); output.weight may be absent (tied to token_embd);
//    rope_freqs.weight is optional;
//  - no tensor the architecture does not use;
//  - the data layout: no two tensors share bytes, no bytes belong to no
//    tensor (GgufFile::CheckDataLayout).
// Other failures are INVALID_ARGUMENT naming the tensor (or key) and what was
// expected vs found.
absl::Status ValidateModelTensors(const GgufFile& f, const ModelConfig& c);

// Validates (ValidateModelTensors), then binds every tensor the config needs.
absl::StatusOr<ModelWeights> BindWeights(const GgufFile& f, const ModelConfig& c);

// A model ready to run: the mapping, its config and views into it.
struct Model {
  std::unique_ptr<GgufFile> file;
  ModelConfig config;
  ModelWeights weights;

  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& path);
  int64_t ParameterCount() const;
};

}  // namespace specserve
