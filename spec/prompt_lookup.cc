#include "spec/prompt_lookup.h"

#include <algorithm>
#include <memory>

namespace specserve {

std::vector<TokenId> PromptLookup(const std::vector<TokenId>& ctx, int32_t k, int32_t max_ngram, int32_t min_ngram) {
  const int64_t n_ctx = static_cast<int64_t>(ctx.size());
  for (int32_t n = static_cast<int32_t>(std::min<int64_t>(max_ngram, n_ctx - 1)); n >= min_ngram; --n) {
    const TokenId* suffix = ctx.data() + n_ctx - n;
    // Most recent match first: recent text predicts the continuation best.
    for (int64_t start = n_ctx - n - 1; start >= 0; --start) {
      if (!std::equal(suffix, suffix + n, ctx.data() + start)) continue;
      const int64_t from = start + n;
      const int64_t take = std::min<int64_t>(k, n_ctx - from);
      if (take <= 0) continue;
      return std::vector<TokenId>(ctx.begin() + from, ctx.begin() + from + take);
    }
  }
  return {};
}

Proposal LookupProposal(const std::vector<TokenId>& ctx, int32_t k, int32_t max_ngram, int32_t min_ngram,
                        const TokenFilter* filter) {
  Proposal p;
  p.tokens = PromptLookup(ctx, k, max_ngram, min_ngram);
  if (filter != nullptr && !p.tokens.empty()) {
    // A fork: the filter itself stays at the end of ctx.
    std::unique_ptr<TokenFilter> fork = filter->Clone();
    size_t allowed = 0;
    while (allowed < p.tokens.size() && fork->Advance(p.tokens[allowed]).ok()) ++allowed;
    p.tokens.resize(allowed);
  }
  p.dists.reserve(p.tokens.size());
  for (TokenId t : p.tokens) p.dists.push_back(SparseDist{{t}, {1.0f}});
  return p;
}

}  // namespace specserve
