// CPU reference implementations of the element-wise ops of a Llama block.
// Each CUDA kernel in this folder has its reference here, and the parity
// test compares the two. Activations are row-major [T, width] fp32.
#pragma once

#include <cstdint>

namespace specserve::cpu {

// y[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w          x, y: [T, n]; w: [n]
void RmsNorm(const float* x, const float* w, float* y, int64_t T, int64_t n, float eps);

struct RopeParams {
  int32_t n_heads;     // heads in this tensor (query or key heads)
  int32_t head_dim;
  int32_t rope_dim;    // leading dims of each head that rotate
  float base;          // theta_i = pos * base^(-2i / rope_dim)
  bool neox;           // pairs (i, i + rope_dim/2) instead of (2i, 2i+1)
  // Optional per-frequency divisors [rope_dim / 2] (Llama 3.1's
  // rope_freqs.weight): theta_i = pos * base^(-2i / rope_dim) / freq_factors[i],
  // as llama.cpp applies them. nullptr: all ones.
  const float* freq_factors = nullptr;
  // Linear position scaling (rope.scaling.type = linear): theta_i *= freq_scale,
  // i.e. 1 / rope.scaling.factor.
  float freq_scale = 1.0f;
};
// Rotates x [T, n_heads * head_dim] in place; positions: [T].
void Rope(float* x, const int32_t* positions, int64_t T, const RopeParams& p);
// The same in two steps, so that one forward pass computes the angles once
// for every layer, queries and keys alike (n_heads is not used by the first):
// cs: [T, rope_dim / 2, 2] = (cos theta, sin theta) per token and frequency.
void RopeAngles(const int32_t* positions, int64_t T, const RopeParams& p, float* cs);
void RopeApply(float* x, int64_t T, const RopeParams& p, const float* cs);

// out[t, i] = silu(gate[t, i]) * up[t, i]                 [T, n]
void SwiGlu(const float* gate, const float* up, float* out, int64_t n_total);

// y[i] += x[i]
void AddInPlace(float* y, const float* x, int64_t n);
// y[t, i] += b[i]                                          y: [T, n]
void AddBias(float* y, const float* b, int64_t T, int64_t n);

}  // namespace specserve::cpu
