#include "kernels/cuda_rope.cuh"

#include "kernels/cuda_util.h"

namespace specserve::cuda {
namespace {

constexpr int kThreads = 128;

// One thread per (token, pair index i); it rotates pair i of every head.
__global__ void RopeKernel(float* x, const int32_t* __restrict__ positions, int64_t T,
                           int64_t row_stride, cpu::RopeParams p) {
  const int32_t half = p.rope_dim / 2;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (item >= T * half) return;
  const int64_t t = item / half;
  const int32_t i = static_cast<int32_t>(item % half);
  // The CPU's order: multiplying and dividing by exactly 1 changes nothing.
  const double factor = p.freq_factors != nullptr ? p.freq_factors[i] : 1.0;
  const double theta = static_cast<double>(positions[t]) *
                       pow(static_cast<double>(p.base), -2.0 * i / p.rope_dim) * p.freq_scale / factor;
  const float c = static_cast<float>(cos(theta));
  const float s = static_cast<float>(sin(theta));
  const int32_t a = p.neox ? i : 2 * i;
  const int32_t b = p.neox ? i + half : 2 * i + 1;
  float* row = x + t * row_stride;
  for (int32_t h = 0; h < p.n_heads; ++h) {
    float* v = row + static_cast<int64_t>(h) * p.head_dim;
    const float x0 = v[a], x1 = v[b];
    v[a] = x0 * c - x1 * s;
    v[b] = x0 * s + x1 * c;
  }
}

}  // namespace

absl::Status LaunchRope(const RopeArgs& a, cudaStream_t stream) {
  const cpu::RopeParams& p = a.p;
  if (a.T < 0 || p.n_heads < 1 || p.head_dim < 1 || p.rope_dim < 2 || p.rope_dim % 2 != 0 ||
      p.rope_dim > p.head_dim || !(p.base > 0.0f) || !(p.freq_scale > 0.0f)) {
    return absl::InvalidArgumentError("rope: bad shape or base");
  }
  const int64_t width = static_cast<int64_t>(p.n_heads) * p.head_dim;
  const int64_t stride = a.row_stride == 0 ? width : a.row_stride;
  if (stride < width) return absl::InvalidArgumentError("rope: row_stride smaller than a row");
  if (a.T == 0) return absl::OkStatus();
  if (a.x == nullptr || a.positions == nullptr) return absl::InvalidArgumentError("rope: null pointer");
  const int64_t items = a.T * (p.rope_dim / 2);
  const int64_t blocks = (items + kThreads - 1) / kThreads;
  if (blocks > 0x7fffffff) return absl::InvalidArgumentError("rope: too many tokens");
  RopeKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a.x, a.positions, a.T, stride, p);
  return CheckLaunch("RopeKernel");
}

}  // namespace specserve::cuda
