// Device-only helpers shared by the kernels in this folder (block reductions).
// Included by .cu files only; the public launcher headers (.cuh beside each
// .cu) stay plain C++.
#pragma once

#include <cuda_runtime.h>

namespace specserve::cuda::device {

inline constexpr int kWarp = 32;

template <typename T>
__device__ __forceinline__ T WarpSum(T v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T>
__device__ __forceinline__ T WarpMax(T v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o /= 2) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block; every thread gets the result. `scratch` holds >= 32
// values; blockDim.x is a multiple of 32. Contains __syncthreads: call from
// all threads.
template <typename T>
__device__ T BlockSum(T v, T* scratch) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int n_warps = blockDim.x / kWarp;
  v = WarpSum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T r = lane < n_warps ? scratch[lane] : T(0);
  return WarpSum(r);
}

}  // namespace specserve::cuda::device
