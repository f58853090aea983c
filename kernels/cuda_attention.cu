#include "kernels/cuda_attention.cuh"

#include <algorithm>
#include <cmath>

#include "kernels/attention_plan.h"
#include "kernels/cuda_device_utils.cuh"
#include "common/status_macros.h"
#include "kernels/cuda_util.h"

namespace specserve::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * device::kWarp;
constexpr int kMaxGroup = 8;     // query heads per block (a larger GQA group takes several blocks)
constexpr int kMaxHeadDim = 256;
constexpr int kMaxDimsPerLane = kMaxHeadDim / device::kWarp;

// The key split is fixed (kernels/attention_plan.h): chunks of
// kAttentionKeyChunk keys, whatever the pass.
struct Split {
  int32_t splits;
  int32_t chunk;  // keys per split
};

Split ChooseSplit(int32_t max_keys) { return {AttentionSplits(max_keys), kAttentionKeyChunk}; }
static_assert(kAttentionKeyChunk % (kWarps * device::kWarp) == 0,
              "a chunk must start each warp's sweep at the same offset");

struct KernelParams {
  PagedAttentionArgs a;
  int32_t group;        // query heads per kv head
  int32_t head_groups;  // blocks per kv head (ceil(group / kMaxGroup))
  int32_t splits;
  int32_t chunk;
  float* part_acc;      // [T * n_head * splits, head_dim]  (splits > 1)
  float* part_ml;       // [T * n_head * splits, 2]: running max, denominator
};

__global__ void __launch_bounds__(kThreads) PagedAttentionKernel(KernelParams kp) {
  const PagedAttentionArgs& a = kp.a;
  __shared__ __align__(16) float q_s[kMaxGroup][kMaxHeadDim];
  __shared__ float w_s[kWarps][kMaxGroup][device::kWarp];
  __shared__ int64_t slot_s[kWarps][device::kWarp];
  __shared__ float acc_s[kWarps][kMaxGroup][kMaxHeadDim];
  __shared__ float m_s[kWarps][kMaxGroup], l_s[kWarps][kMaxGroup];

  const int lane = threadIdx.x % device::kWarp, warp = threadIdx.x / device::kWarp;
  const int64_t t = blockIdx.x;
  const int32_t kvh = blockIdx.y / kp.head_groups;
  const int32_t hg = blockIdx.y % kp.head_groups;
  const int32_t split = blockIdx.z;
  const int32_t hd = a.head_dim;
  const int32_t h_begin = kvh * kp.group + hg * kMaxGroup;
  const int32_t n_g = min(kMaxGroup, kp.group - hg * kMaxGroup);
  const int64_t kv_dim = static_cast<int64_t>(a.n_head_kv) * hd;
  const int32_t* table = a.block_tables + a.table_offset[a.token_seq[t]];
  const int32_t n_keys = a.positions[t] + 1;
  const int32_t k0 = split * kp.chunk;
  const int32_t k1 = min(n_keys, k0 + kp.chunk);

  for (int i = threadIdx.x; i < kMaxGroup * hd; i += blockDim.x) {
    const int g = i / hd, d = i % hd;
    q_s[g][d] = g < n_g ? a.q[(t * a.n_head + h_begin + g) * hd + d] : 0.0f;
  }
  __syncthreads();

  float m[kMaxGroup], l[kMaxGroup], acc[kMaxGroup][kMaxDimsPerLane];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int j = 0; j < kMaxDimsPerLane; ++j) acc[g][j] = 0.0f;
  }

  const float* k_head = a.k_cache + static_cast<int64_t>(kvh) * hd;
  const float* v_head = a.v_cache + static_cast<int64_t>(kvh) * hd;
  for (int32_t base = k0 + warp * device::kWarp; base < k1; base += kWarps * device::kWarp) {
    const int32_t p = base + lane;
    const bool valid = p < k1;
    const int64_t slot = valid ? static_cast<int64_t>(table[p / a.block_size]) * a.block_size + p % a.block_size : 0;
    slot_s[warp][lane] = slot;
    // Scores of this lane's key against every query head of the group.
    float s[kMaxGroup];
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) s[g] = 0.0f;
    if (valid) {
      const float4* k4 = reinterpret_cast<const float4*>(k_head + slot * kv_dim);
      for (int d4 = 0; d4 < hd / 4; ++d4) {
        const float4 kv = k4[d4];
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g) {
          if (g < n_g) {
            const float4 qv = reinterpret_cast<const float4*>(q_s[g])[d4];
            s[g] += qv.x * kv.x + qv.y * kv.y + qv.z * kv.z + qv.w * kv.w;
          }
        }
      }
    }
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      if (g < n_g) {
        const float sg = valid ? s[g] * a.scale : -INFINITY;
        const float new_m = fmaxf(m[g], device::WarpMax(sg));  // lane 0 is valid: finite
        const float alpha = expf(m[g] - new_m);                // m = -inf the first time: 0
        const float w = valid ? expf(sg - new_m) : 0.0f;
        l[g] = l[g] * alpha + device::WarpSum(w);
#pragma unroll
        for (int j = 0; j < kMaxDimsPerLane; ++j) acc[g][j] *= alpha;
        m[g] = new_m;
        w_s[warp][g][lane] = w;
      }
    }
    __syncwarp();
    const int n_valid = min(device::kWarp, k1 - base);
    for (int j = 0; j < n_valid; ++j) {
      const float* v_row = v_head + slot_s[warp][j] * kv_dim;
#pragma unroll
      for (int jj = 0; jj < kMaxDimsPerLane; ++jj) {
        const int d = lane + jj * device::kWarp;
        if (d < hd) {
          const float v = v_row[d];
#pragma unroll
          for (int g = 0; g < kMaxGroup; ++g) {
            if (g < n_g) acc[g][jj] += w_s[warp][g][j] * v;
          }
        }
      }
    }
    __syncwarp();
  }

  // Merge the warps' partial softmaxes.
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    if (g < n_g) {
      if (lane == 0) {
        m_s[warp][g] = m[g];
        l_s[warp][g] = l[g];
      }
#pragma unroll
      for (int jj = 0; jj < kMaxDimsPerLane; ++jj) {
        const int d = lane + jj * device::kWarp;
        if (d < hd) acc_s[warp][g][d] = acc[g][jj];
      }
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n_g * hd; i += blockDim.x) {
    const int g = i / hd, d = i % hd;
    float M = -INFINITY;
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, m_s[w][g]);
    float L = 0.0f, A = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      if (m_s[w][g] == -INFINITY) continue;  // this warp saw no keys
      const float f = expf(m_s[w][g] - M);
      L += f * l_s[w][g];
      A += f * acc_s[w][g][d];
    }
    const int64_t row = t * a.n_head + h_begin + g;
    if (kp.splits == 1) {
      a.out[row * hd + d] = A / L;
    } else {
      const int64_t part = row * kp.splits + split;
      kp.part_acc[part * hd + d] = A;
      if (d == 0) {
        kp.part_ml[2 * part] = M;
        kp.part_ml[2 * part + 1] = L;
      }
    }
  }
}

// One block per (token, query head): merges the splits' partial softmaxes.
__global__ void MergeSplitsKernel(const float* __restrict__ part_acc, const float* __restrict__ part_ml,
                                  int32_t splits, int32_t hd, float* __restrict__ out) {
  const int64_t row = blockIdx.x;
  float M = -INFINITY;
  for (int s = 0; s < splits; ++s) M = fmaxf(M, part_ml[2 * (row * splits + s)]);
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float L = 0.0f, A = 0.0f;
    for (int s = 0; s < splits; ++s) {
      const int64_t part = row * splits + s;
      const float ms = part_ml[2 * part];
      if (ms == -INFINITY) continue;  // split past this token's keys
      const float f = expf(ms - M);
      L += f * part_ml[2 * part + 1];
      A += f * part_acc[part * hd + d];
    }
    out[row * hd + d] = A / L;
  }
}

}  // namespace

size_t PagedAttentionWorkspaceBytes(int64_t T, int32_t n_head, int32_t n_head_kv, int32_t head_dim,
                                    int32_t max_keys) {
  if (T <= 0 || n_head < 1 || n_head_kv < 1 || max_keys < 1) return 0;
  if (ChooseSplit(max_keys).splits == 1) return 0;
  return static_cast<size_t>(AttentionPartBytes(T, n_head, head_dim, max_keys));
}

absl::Status LaunchPagedAttention(const PagedAttentionArgs& a, cudaStream_t stream) {
  if (a.T < 0 || a.T > 0x7fffffff) return absl::InvalidArgumentError("attention: bad token count");
  if (a.n_head < 1 || a.n_head_kv < 1 || a.n_head % a.n_head_kv != 0) {
    return absl::InvalidArgumentError("attention: n_head must be a positive multiple of n_head_kv");
  }
  if (a.head_dim < 4 || a.head_dim > kMaxHeadDim || a.head_dim % 4 != 0) {
    return absl::InvalidArgumentError("attention: head_dim must be a multiple of 4 in [4, 256]");
  }
  if (a.block_size < 1 || a.max_keys < 1) return absl::InvalidArgumentError("attention: bad block_size or max_keys");
  if (a.T == 0) return absl::OkStatus();
  if (a.q == nullptr || a.positions == nullptr || a.token_seq == nullptr || a.block_tables == nullptr ||
      a.table_offset == nullptr || a.k_cache == nullptr || a.v_cache == nullptr || a.out == nullptr) {
    return absl::InvalidArgumentError("attention: null pointer");
  }
  const Split sp = ChooseSplit(a.max_keys);
  const int64_t slice = AttentionSliceTokens(a.T, a.n_head, a.head_dim, a.max_keys);
  KernelParams kp;
  kp.a = a;
  kp.group = a.n_head / a.n_head_kv;
  kp.head_groups = (kp.group + kMaxGroup - 1) / kMaxGroup;
  kp.splits = sp.splits;
  kp.chunk = sp.chunk;
  kp.part_acc = nullptr;
  kp.part_ml = nullptr;
  if (sp.splits > 65535) return absl::InvalidArgumentError("attention: too many keys");
  if (sp.splits > 1) {
    const size_t need = PagedAttentionWorkspaceBytes(a.T, a.n_head, a.n_head_kv, a.head_dim, a.max_keys);
    if (a.workspace == nullptr || a.workspace_bytes < need) {
      return absl::InvalidArgumentError("attention: workspace too small");
    }
    const size_t parts = static_cast<size_t>(slice) * a.n_head * sp.splits;
    kp.part_acc = static_cast<float*>(a.workspace);
    kp.part_ml = kp.part_acc + parts * a.head_dim;
  }
  // Slices of query tokens: each token's result is its own, so slicing
  // changes no bits; it only bounds the partials' scratch.
  const int64_t q_row = static_cast<int64_t>(a.n_head) * a.head_dim;
  for (int64_t t0 = 0; t0 < a.T; t0 += slice) {
    const int64_t n = std::min(slice, a.T - t0);
    KernelParams ks = kp;
    ks.a.q = a.q + t0 * q_row;
    ks.a.positions = a.positions + t0;
    ks.a.token_seq = a.token_seq + t0;
    ks.a.out = a.out + t0 * q_row;
    ks.a.T = n;
    const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(a.n_head_kv * kp.head_groups),
                    static_cast<unsigned>(sp.splits));
    PagedAttentionKernel<<<grid, kThreads, 0, stream>>>(ks);
    RETURN_IF_ERROR(CheckLaunch("PagedAttentionKernel"));
    if (sp.splits == 1) continue;
    const int64_t rows = n * a.n_head;
    if (rows > 0x7fffffff) return absl::InvalidArgumentError("attention: too many rows");
    MergeSplitsKernel<<<static_cast<unsigned>(rows), 128, 0, stream>>>(ks.part_acc, ks.part_ml, sp.splits,
                                                                      a.head_dim, ks.a.out);
    RETURN_IF_ERROR(CheckLaunch("MergeSplitsKernel"));
  }
  return absl::OkStatus();
}

}  // namespace specserve::cuda
