// The device matrix product's plan, in plain C++ so host tests check it
// (kernels/cuda_matmul.cu uses it on both sides of nvcc).
//
// - Batch invariance (docs/exact_verification.md): a pass of at most
//   kFixedOrderMaxTokens tokens (decode, verify, small batches of them) goes
//   through a fixed-order fp32 kernel, so that each output element is summed
//   in an order that depends on the matrix width alone, never on how many
//   tokens or sequences share the pass. Larger passes (prefill) use cuBLAS.
// - Split-f16 range: cuBLAS takes f16 operands, and |x| >= 65520 rounds to
//   inf in f16 (then hi - inf = NaN poisons the row). Each activation row is
//   scaled by 2^SplitScaleExponent(max |x|) before the split, which puts its
//   largest entry in [2^14, 2^15), and the output row is scaled back by the
//   inverse power: both exact in binary floating point.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define SPECSERVE_HOST_DEVICE __host__ __device__
#else
#define SPECSERVE_HOST_DEVICE
#endif

namespace specserve {

inline constexpr int64_t kFixedOrderMaxTokens = 32;

SPECSERVE_HOST_DEVICE inline bool UseFixedOrderMatmul(int64_t T) { return T >= 1 && T <= kFixedOrderMaxTokens; }

// e with max_abs * 2^e in [2^14, 2^15) (clamped to [-126, 126], so the
// scale and its inverse are floats); 0 for 0, inf or NaN (nothing to gain).
SPECSERVE_HOST_DEVICE inline int SplitScaleExponent(float max_abs) {
  if (!(max_abs > 0.0f) || !(max_abs <= 3.40282347e38f)) return 0;
  int e = 0;
  frexpf(max_abs, &e);  // max_abs = f * 2^e, f in [0.5, 1)
  const int s = 15 - e;
  return s < -126 ? -126 : s > 126 ? 126 : s;
}

}  // namespace specserve
