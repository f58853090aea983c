// Device-only helpers of the verify-and-resample kernel (kernels/cuda_verify.cu)
// and the draft's sampling kernel (kernels/cuda_draft_sample.cu): the recipe
// of spec/sampling.cc on the device (rank keys, block argmax, ordered visits
// and sums, radix select, sorted bands of rank keys, the top-p cutoff, the
// ordered draw), with the block shape and the shared memory they work in.
// Included by those two .cu files only; everything here is in an unnamed
// namespace.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda_device_utils.cuh"
#include "kernels/glibc_expf.h"

namespace specserve::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / device::kWarp;
constexpr int kItems = 4;                 // consecutive entries per thread in an ordered pass
constexpr int kTile = kThreads * kItems;  // entries compacted per step of an ordered pass
constexpr int kChunk = 1024;              // rank-ordered keys sorted per step of top-p

// Shared memory of one block; the phases that use the union are separated
// by __syncthreads.
struct Shared {
  union {
    struct {
      unsigned hist[kWarps][256];
      unsigned total[256];
    } radix;
    struct {
      float vals[kTile];
      int32_t idx[kTile];
    } tile;
    uint64_t keys[kChunk];
  } u;
  int warp_base[kWarps + 1];
  uint64_t u64;
  double f64;
  float f32;
  int i32[6];
  float argmax_v[kWarps];
  int argmax_i[kWarps];
};

// --- The recipe of spec/sampling.cc, on the device ---------------------

// The rank order as one integer: larger key ranks earlier (sampling.cc RankKey).
__device__ __forceinline__ uint64_t RankKey(float logit, int32_t id) {
  if (!(logit == logit)) logit = -INFINITY;
  if (logit == 0.0f) logit = 0.0f;
  uint32_t bits = __float_as_uint(logit);
  bits = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return (static_cast<uint64_t>(bits) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(id));
}
__device__ __forceinline__ int32_t KeyId(uint64_t key) {
  return static_cast<int32_t>(0xFFFFFFFFu - static_cast<uint32_t>(key));
}

// e = expf((logit - max_logit) / temperature), NaN -> 0; IEEE steps, glibc's expf.
__device__ __forceinline__ float Weight(float logit, float max_logit, float temperature) {
  const float e = GlibcExpf(__fdiv_rn(__fsub_rn(logit, max_logit), temperature));
  return e == e ? e : 0.0f;
}

// Argmax (lowest index among equal maxima, NaN never wins, 0 if no value
// exceeds -inf). Every thread gets the index; the value is read back from v.
__device__ int BlockArgmax(const float* v, int n, Shared& sh) {
  float bv = -INFINITY;
  int bi = 0x7fffffff;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float x = v[i];
    if (x > bv) {
      bv = x;
      bi = i;
    }
  }
#pragma unroll
  for (int o = device::kWarp / 2; o > 0; o /= 2) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (ov > bv || (ov == bv && oi < bi)) {
      bv = ov;
      bi = oi;
    }
  }
  const int lane = threadIdx.x % device::kWarp, warp = threadIdx.x / device::kWarp;
  if (lane == 0) {
    sh.argmax_v[warp] = bv;
    sh.argmax_i[warp] = bi;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float best_v = -INFINITY;
    int best_i = 0x7fffffff;
    for (int w = 0; w < kWarps; ++w) {
      if (sh.argmax_v[w] > best_v || (sh.argmax_v[w] == best_v && sh.argmax_i[w] < best_i)) {
        best_v = sh.argmax_v[w];
        best_i = sh.argmax_i[w];
      }
    }
    sh.i32[0] = (best_v == -INFINITY || best_i == 0x7fffffff) ? 0 : best_i;
  }
  __syncthreads();
  const int best = sh.i32[0];
  __syncthreads();
  return best;
}

// Calls visit(i, x) on thread 0 for every i in [0, n) whose x = value(i) is
// > 0, in ascending i, until visit returns true. The block compacts each
// tile of kTile entries in order, so the serial part only touches nonzero
// entries. All threads must call it.
template <typename ValueFn, typename VisitFn>
__device__ void OrderedVisit(int n, ValueFn value, VisitFn visit, Shared& sh) {
  const int lane = threadIdx.x % device::kWarp, warp = threadIdx.x / device::kWarp;
  for (int base = 0; base < n; base += kTile) {
    const int first = base + threadIdx.x * kItems;
    float x[kItems];
    int cnt = 0;
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      x[j] = first + j < n ? value(first + j) : 0.0f;
      cnt += x[j] > 0.0f;
    }
    int incl = cnt;  // inclusive warp scan
#pragma unroll
    for (int o = 1; o < device::kWarp; o *= 2) {
      const int y = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += y;
    }
    if (lane == device::kWarp - 1) sh.warp_base[warp] = incl;
    __syncthreads();
    if (threadIdx.x == 0) {
      int run = 0;
      for (int w = 0; w < kWarps; ++w) {
        const int c = sh.warp_base[w];
        sh.warp_base[w] = run;
        run += c;
      }
      sh.warp_base[kWarps] = run;
    }
    __syncthreads();
    int pos = sh.warp_base[warp] + incl - cnt;
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      if (x[j] > 0.0f) {
        sh.u.tile.vals[pos] = x[j];
        sh.u.tile.idx[pos] = first + j;
        ++pos;
      }
    }
    const int count = sh.warp_base[kWarps];
    __syncthreads();
    if (threadIdx.x == 0) {
      int stop = 0;
      for (int c = 0; c < count; ++c) {
        if (visit(sh.u.tile.idx[c], sh.u.tile.vals[c])) {
          stop = 1;
          break;
        }
      }
      sh.i32[1] = stop;
    }
    __syncthreads();
    const int stop = sh.i32[1];
    __syncthreads();
    if (stop) break;
  }
}

// Sum of the positive values in ascending index order, in double (the
// recipe's DenseSum: zeros add nothing). Every thread gets the result.
template <typename ValueFn>
__device__ double OrderedSum(int n, ValueFn value, Shared& sh) {
  double s = 0.0;
  OrderedVisit(n, value, [&](int, float v) { s = __dadd_rn(s, static_cast<double>(v)); return false; }, sh);
  if (threadIdx.x == 0) sh.f64 = s;
  __syncthreads();
  s = sh.f64;
  __syncthreads();
  return s;
}

// The m-th largest (1-based) rank key among the row's keys in [lo, hi):
// MSB-first radix select, 8 bits per pass, per-warp histograms with
// match_any aggregation. Requires 1 <= m <= that count. All threads call it.
__device__ uint64_t SelectKth(const float* logits, int V, uint64_t lo, uint64_t hi, unsigned m, Shared& sh) {
  const int lane = threadIdx.x % device::kWarp, warp = threadIdx.x / device::kWarp;
  uint64_t prefix = 0, mask = 0;
  unsigned rem = m;
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < kWarps * 256; i += blockDim.x) (&sh.u.radix.hist[0][0])[i] = 0;
    __syncthreads();
    for (int base = 0; base < V; base += blockDim.x) {
      const int i = base + threadIdx.x;
      bool in = false;
      unsigned digit = 0;
      if (i < V) {
        const uint64_t key = RankKey(logits[i], i);
        in = key >= lo && key < hi && (key & mask) == prefix;
        digit = static_cast<unsigned>(key >> shift) & 255u;
      }
      const unsigned peers = __match_any_sync(0xffffffffu, in ? digit : 256u + lane);
      if (in && lane == __ffs(peers) - 1) atomicAdd(&sh.u.radix.hist[warp][digit], __popc(peers));
    }
    __syncthreads();
    for (int d = threadIdx.x; d < 256; d += blockDim.x) {
      unsigned s = 0;
      for (int w = 0; w < kWarps; ++w) s += sh.u.radix.hist[w][d];
      sh.u.radix.total[d] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int d = 255;
      for (; d > 0; --d) {
        if (rem <= sh.u.radix.total[d]) break;
        rem -= sh.u.radix.total[d];
      }
      sh.u64 = prefix | (static_cast<uint64_t>(d) << shift);
      sh.i32[2] = static_cast<int>(rem);
    }
    __syncthreads();
    prefix = sh.u64;
    rem = static_cast<unsigned>(sh.i32[2]);
    mask |= 0xFFull << shift;
    __syncthreads();
  }
  return prefix;
}

// Sorts keys[0, n) descending; n a power of two <= kChunk.
__device__ void BitonicSortDescending(uint64_t* keys, int n) {
  for (int k = 2; k <= n; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const int ixj = i ^ j;
        if (ixj > i) {
          const uint64_t a = keys[i], b = keys[ixj];
          const bool descending = (i & k) == 0;
          if (descending ? a < b : a > b) {
            keys[i] = b;
            keys[ixj] = a;
          }
        }
      }
      __syncthreads();
    }
  }
}

// The m rank keys of the row in the band [lo, hi) (exactly m of them,
// m <= kChunk) into sh.u.keys[0, m), sorted descending; keys [m, n2) are 0
// (ranks after every key), n2 the power of two >= m. All threads call it; on
// return every thread sees the sorted keys (the barrier before the sort, and
// the sort's own when n2 > 1). Uses sh.i32[3].
__device__ void SortBandKeys(const float* logits, int V, uint64_t lo, uint64_t hi, int m, Shared& sh) {
  if (threadIdx.x == 0) sh.i32[3] = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < V; i += blockDim.x) {
    const uint64_t key = RankKey(logits[i], i);
    if (key >= lo && key < hi) {
      const int slot = atomicAdd(&sh.i32[3], 1);
      if (slot < kChunk) sh.u.keys[slot] = key;
    }
  }
  __syncthreads();
  int n2 = 1;
  while (n2 < m) n2 <<= 1;
  for (int j = m + threadIdx.x; j < n2; j += blockDim.x) sh.u.keys[j] = 0;  // 0 ranks after every key
  __syncthreads();
  BitonicSortDescending(sh.u.keys, n2);
}

// sampling.cc TopPCutoff: the rank key of the last token top-p keeps, i.e.
// the first key in rank order at which the running double sum of e reaches
// target, over the pool (the pool_size keys >= pool_lo); the pool's last key
// if it never does. Walks the rank order in sorted chunks of kChunk keys.
__device__ uint64_t TopPCutoff(const float* logits, int V, uint64_t pool_lo, int pool_size,
                               const float* e, double target, Shared& sh) {
  uint64_t upper = ~0ull;  // exclusive: no rank key reaches it
  int remaining = pool_size;
  double cum = 0.0;        // thread 0's running sum
  for (;;) {
    const int m = min(kChunk, remaining);
    const uint64_t lo = m == remaining ? pool_lo : SelectKth(logits, V, pool_lo, upper, m, sh);
    SortBandKeys(logits, V, lo, upper, m, sh);
    if (threadIdx.x == 0) {
      int found = 0;
      uint64_t cut = 0;
      for (int j = 0; j < m; ++j) {
        cum = __dadd_rn(cum, static_cast<double>(e[KeyId(sh.u.keys[j])]));
        if (cum >= target) {
          cut = sh.u.keys[j];
          found = 1;
          break;
        }
      }
      if (!found && m == remaining) {  // not reached at all: rounding; keep the pool
        cut = sh.u.keys[m - 1];
        found = 1;
      }
      sh.u64 = cut;
      sh.i32[4] = found;
    }
    __syncthreads();
    const int found = sh.i32[4];
    const uint64_t cut = sh.u64;
    __syncthreads();
    if (found) return cut;
    remaining -= m;
    upper = lo;
  }
}

// sampling.cc SampleFromProbs over weights w[0, ..) whose positive entries
// sum (in order) to total and end at `last`: the first i with running sum >
// u * total, else last. Every thread gets the token.
template <typename ValueFn>
__device__ int SampleOrdered(ValueFn w, double total, int last, float u, Shared& sh) {
  if (last < 0) return -1;
  const double target = __dmul_rn(static_cast<double>(u), total);
  double cum = 0.0;
  int found = last;
  OrderedVisit(
      last, w,
      [&](int i, float v) {
        cum = __dadd_rn(cum, static_cast<double>(v));
        if (cum > target) {
          found = i;
          return true;
        }
        return false;
      },
      sh);
  if (threadIdx.x == 0) sh.i32[5] = found;
  __syncthreads();
  found = sh.i32[5];
  __syncthreads();
  return found;
}

}  // namespace
}  // namespace specserve::cuda
