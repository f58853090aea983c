// Writes the new tokens' keys and values into the paged KV cache on the
// device (the CPU backend's StoreKv). Each token's slot (block * block_size
// + position % block_size) comes from the host-side block table.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace specserve::cuda {

struct KvStoreArgs {
  const float* k = nullptr;        // [T, kv_dim] device
  const float* v = nullptr;        // [T, kv_dim]
  const int64_t* slots = nullptr;  // [T] cache slot of each token
  int64_t T = 0;
  int64_t kv_dim = 0;
  float* k_cache = nullptr;        // [num_slots, kv_dim] (one layer)
  float* v_cache = nullptr;
  int64_t num_slots = 0;           // slots outside [0, num_slots) are skipped
};

absl::Status LaunchKvStore(const KvStoreArgs& a, cudaStream_t stream);

}  // namespace specserve::cuda
