// Prompt lookup (Saxena 2023): a free draft for text that repeats its context.
#pragma once

#include <cstdint>
#include <vector>

#include "spec/round.h"

namespace specserve {

// Prompt lookup (Saxena 2023): the tokens (at most k) that followed the most
// recent earlier occurrence of the longest suffix of ctx of max_ngram down to
// min_ngram tokens; empty when there is none.
std::vector<TokenId> PromptLookup(const std::vector<TokenId>& ctx, int32_t k, int32_t max_ngram, int32_t min_ngram);

}  // namespace specserve
