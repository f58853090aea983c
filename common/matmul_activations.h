// How the CPU's matrix products treat their activations (--cpu-activations).
//
// - kInt8 (the default): each token's activations are quantized to int8 in blocks of 32
//   (one fp32 scale per block, as llama.cpp's Q8_0 does) and multiplied into
//   the quantized weights with integer dot products (AVX-512 VNNI), for
//   Q8_0, Q5_0, Q4_K and Q6_K weights; other types stay fp32. Several times
//   fewer instructions per weight, so decoding reaches the memory bound, at
//   the price of llama.cpp's rounding (logits move by ~0.1-0.2 on the bundled
//   quantized models; kernels/cpu_matmul_int8.h). Weights that are not
//   quantized (f32, f16, bf16) compute in fp32 either way, so this default
//   only changes the function of quantized models.
// - kFp32: fp32 products of exactly the values ggml dequantizes
//   (kernels/cpu_matmul_avx512.h); the logits match the golden references
//   (fp32 on the dequantized weights) to 1e-5. The golden tests name it.
// Both are batch invariant: a verify pass of K+1 tokens gives each token the
// bits one-token decoding gives it, so speculative decoding keeps exactly the
// distribution of the model as this mode computes it.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"

namespace specserve {

enum class MatMulActivations { kFp32, kInt8 };

inline absl::StatusOr<MatMulActivations> ParseMatMulActivations(std::string_view s) {
  if (s == "fp32") return MatMulActivations::kFp32;
  if (s == "int8") return MatMulActivations::kInt8;
  return absl::InvalidArgumentError("--cpu-activations must be fp32 or int8");
}

inline const char* MatMulActivationsName(MatMulActivations a) {
  return a == MatMulActivations::kInt8 ? "int8" : "fp32";
}

}  // namespace specserve
