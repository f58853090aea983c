#include "kernels/cuda_kv_store.cuh"

#include "kernels/cuda_util.h"

namespace specserve::cuda {
namespace {

constexpr int kThreads = 128;

// One block per token.
__global__ void KvStoreKernel(KvStoreArgs a) {
  const int64_t t = blockIdx.x;
  const int64_t slot = a.slots[t];
  if (slot < 0 || slot >= a.num_slots) return;
  const float* k = a.k + t * a.kv_dim;
  const float* v = a.v + t * a.kv_dim;
  float* kc = a.k_cache + slot * a.kv_dim;
  float* vc = a.v_cache + slot * a.kv_dim;
  for (int64_t i = threadIdx.x; i < a.kv_dim; i += blockDim.x) {
    kc[i] = k[i];
    vc[i] = v[i];
  }
}

}  // namespace

absl::Status LaunchKvStore(const KvStoreArgs& a, cudaStream_t stream) {
  if (a.T < 0 || a.T > 0x7fffffff || a.kv_dim < 1 || a.num_slots < 0) {
    return absl::InvalidArgumentError("kv store: bad shape");
  }
  if (a.T == 0) return absl::OkStatus();
  if (a.k == nullptr || a.v == nullptr || a.slots == nullptr || a.k_cache == nullptr || a.v_cache == nullptr) {
    return absl::InvalidArgumentError("kv store: null pointer");
  }
  KvStoreKernel<<<static_cast<unsigned>(a.T), kThreads, 0, stream>>>(a);
  return CheckLaunch("KvStoreKernel");
}

}  // namespace specserve::cuda
