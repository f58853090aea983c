#include "common/kv_sizing.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/kv_cache.h"

namespace specserve {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kMaxBlocks = std::numeric_limits<int32_t>::max() / 2;

}  // namespace

int64_t KvHeadroomBytes(int64_t free_bytes) {
  return std::max(kKvHeadroomMinBytes, std::max<int64_t>(free_bytes, 0) * kKvHeadroomPercent / 100);
}

int64_t KvBytesPerPosition(const ModelConfig& c) { return 2 * int64_t{c.n_layer} * c.kv_dim() * sizeof(float); }

std::string KvPoolSize::Describe(int32_t block_size, int64_t bytes_per_position, int32_t contexts) const {
  const int64_t mib = static_cast<int64_t>(blocks) * block_size * bytes_per_position / kMiB;
  std::string why;
  switch (limit) {
    case KvLimit::kBlocksFlag:
      why = "--kv-blocks";
      break;
    case KvLimit::kSessions:
      why = absl::StrCat("--max-sessions ", std::max(1, contexts), " full contexts");
      break;
    case KvLimit::kMemoryFlag:
      why = "--kv-memory-mib";
      break;
    case KvLimit::kFreeMemory:
      why = absl::StrCat("free device memory (", free_bytes / kMiB, " MiB free, ", headroom_bytes / kMiB,
                         " MiB kept)");
      break;
  }
  return absl::StrCat(blocks, " KV blocks of ", block_size, " (", mib, " MiB): ", why);
}

absl::StatusOr<KvPoolSize> KvBlocksFromFreeMemory(const ModelConfig& c, const BackendOptions& opts,
                                                  int64_t bytes_per_position, int64_t free_bytes) {
  const int64_t per_context = KvPool::BlocksFor(c.n_ctx, opts.kv_block_size);
  const int64_t bytes_per_block = std::max<int64_t>(1, bytes_per_position * opts.kv_block_size);
  KvPoolSize out;
  out.free_bytes = std::max<int64_t>(free_bytes, 0);
  out.headroom_bytes = KvHeadroomBytes(out.free_bytes);
  const int64_t usable = std::max<int64_t>(0, out.free_bytes - out.headroom_bytes);

  int64_t blocks = per_context * std::max(1, opts.kv_contexts);
  out.limit = KvLimit::kSessions;
  if (opts.kv_memory_mib > 0) {
    const int64_t flag = std::max(per_context, opts.kv_memory_mib * kMiB / bytes_per_block);
    if (flag < blocks) {
      blocks = flag;
      out.limit = KvLimit::kMemoryFlag;
    }
  }
  const int64_t affordable = usable / bytes_per_block;
  if (affordable < blocks) {
    blocks = affordable;
    out.limit = KvLimit::kFreeMemory;
  }
  if (blocks < per_context) {
    const int64_t context_mib = (per_context * bytes_per_block + kMiB - 1) / kMiB;
    return absl::ResourceExhaustedError(absl::StrCat(
        "the KV cache cannot hold one full context: ", out.free_bytes / kMiB,
        " MiB of device memory are free after the weights and workspaces, of which ", out.headroom_bytes / kMiB,
        " MiB stay free as headroom (the larger of ", kKvHeadroomMinBytes / kMiB, " MiB and ", kKvHeadroomPercent,
        "%), and one context of ", c.n_ctx, " positions needs ", context_mib,
        " MiB: give --kv-blocks N explicitly (a pool smaller than one context serves only shorter sessions), use a "
        "model with a smaller context, or a device with more free memory (--max-sessions only sets how many "
        "contexts the pool aims for)"));
  }
  out.blocks = static_cast<int32_t>(std::min(blocks, kMaxBlocks));
  return out;
}

}  // namespace specserve
