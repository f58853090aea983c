#include "kernels/cpu_ops.h"

#include <immintrin.h>

#include <cmath>
#include <vector>

#include "kernels/cpu_exp.h"

namespace specserve::cpu {

void RmsNorm(const float* x, const float* w, float* y, int64_t T, int64_t n, float eps) {
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = x + t * n;
    float* yr = y + t * n;
    double ss = 0;  // double: the sum of squares of a few thousand activations
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float scale = static_cast<float>(1.0 / std::sqrt(ss / n + eps));
    for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * scale * w[i];
  }
}

void RopeAngles(const int32_t* positions, int64_t T, const RopeParams& p, float* cs) {
  const int32_t half = p.rope_dim / 2;
  for (int64_t t = 0; t < T; ++t) {
    const double pos = positions[t];
    for (int32_t i = 0; i < half; ++i) {
      // Multiplying and dividing by exactly 1 leaves theta unchanged, so
      // files without scaling rotate bit-for-bit as before.
      const double factor = p.freq_factors != nullptr ? p.freq_factors[i] : 1.0;
      const double theta = pos * std::pow(static_cast<double>(p.base), -2.0 * i / p.rope_dim) *
                           p.freq_scale / factor;
      cs[(t * half + i) * 2] = static_cast<float>(std::cos(theta));
      cs[(t * half + i) * 2 + 1] = static_cast<float>(std::sin(theta));
    }
  }
}

void RopeApply(float* x, int64_t T, const RopeParams& p, const float* cs) {
  const int32_t half = p.rope_dim / 2;
  for (int64_t t = 0; t < T; ++t) {
    for (int32_t h = 0; h < p.n_heads; ++h) {
      float* v = x + (t * p.n_heads + h) * p.head_dim;
      for (int32_t i = 0; i < half; ++i) {
        const float c = cs[(t * half + i) * 2], s = cs[(t * half + i) * 2 + 1];
        const int32_t a = p.neox ? i : 2 * i;
        const int32_t b = p.neox ? i + half : 2 * i + 1;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
      }
    }
  }
}

void Rope(float* x, const int32_t* positions, int64_t T, const RopeParams& p) {
  std::vector<float> cs(T * p.rope_dim);
  RopeAngles(positions, T, p, cs.data());
  RopeApply(x, T, p, cs.data());
}

void SwiGlu(const float* gate, const float* up, float* out, int64_t n_total) {
  int64_t i = 0;
  const __m256 one = _mm256_set1_ps(1.f);
  for (; i + 8 <= n_total; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
  }
  for (; i < n_total; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void AddInPlace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void AddBias(float* y, const float* b, int64_t T, int64_t n) {
  for (int64_t t = 0; t < T; ++t) AddInPlace(y + t * n, b, n);
}

}  // namespace specserve::cpu
