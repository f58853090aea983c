#include "common/backend.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/kv_sizing.h"

namespace specserve {

int32_t DefaultKvBlocks(const ModelConfig& c, const BackendOptions& opts, int64_t bytes_per_position) {
  const int64_t per_context = KvPool::BlocksFor(c.n_ctx, opts.kv_block_size);
  const int64_t wanted = per_context * std::max(1, opts.kv_contexts);
  const int64_t bytes_per_block = std::max<int64_t>(1, bytes_per_position * opts.kv_block_size);
  const int64_t mib = opts.kv_memory_mib > 0 ? opts.kv_memory_mib : kDefaultKvMemoryMib;
  const int64_t affordable = (mib << 20) / bytes_per_block;
  const int64_t blocks = std::max(per_context, std::min(wanted, affordable));
  return static_cast<int32_t>(std::min<int64_t>(blocks, std::numeric_limits<int32_t>::max() / 2));
}

absl::Status PrepareBatch(absl::Span<const ForwardSeq> batch, const ModelConfig& c, KvPool& pool) {
  for (size_t i = 0; i < batch.size(); ++i) {
    const ForwardSeq& s = batch[i];
    if (s.kv == nullptr) return absl::InvalidArgumentError("forward: sequence without a KV cache");
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    if (s.n_logits < 0 || s.n_logits > n) {
      return absl::InvalidArgumentError(absl::StrCat("forward: n_logits ", s.n_logits, " not in [0, ", n, "]"));
    }
    if (s.kv->length + n > c.n_ctx) {
      return absl::InvalidArgumentError(absl::StrCat(
          "context overflow: ", s.kv->length, " cached + ", n, " new tokens exceed the context of ", c.n_ctx));
    }
    for (TokenId t : s.tokens) {
      if (t < 0 || t >= c.vocab) {
        return absl::InvalidArgumentError(absl::StrCat("token id ", t, " is outside the vocabulary [0, ", c.vocab, ")"));
      }
    }
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    const ForwardSeq& s = batch[i];
    absl::Status st = pool.Reserve(*s.kv, s.kv->length + static_cast<int32_t>(s.tokens.size()));
    if (!st.ok()) {
      // Give back what this batch reserved so no sequence changed.
      for (size_t j = 0; j <= i; ++j) pool.Truncate(*batch[j].kv, batch[j].kv->length);
      return st;
    }
  }
  return absl::OkStatus();
}

}  // namespace specserve
