// Prompt lookup (Saxena 2023): a free draft for text that repeats its context.
// Written once here; the coordinator's pre-drafter (coordinator/ngram_drafter.h)
// and the draft session (spec/draft_session.h) both propose with LookupProposal.
#pragma once

#include <cstdint>
#include <vector>

#include "spec/round.h"
#include "spec/token_filter.h"

namespace specserve {

// Prompt lookup (Saxena 2023): the tokens (at most k) that followed the most
// recent earlier occurrence of the longest suffix of ctx of max_ngram down to
// min_ngram tokens; empty when there is none.
std::vector<TokenId> PromptLookup(const std::vector<TokenId>& ctx, int32_t k, int32_t max_ngram, int32_t min_ngram);

// PromptLookup's tokens as a proposal, each with its one-hot q (exact like
// any q sent truly), cut before the first token `filter` refuses (a grammar
// at the end of ctx; null: no cut). No tokens when nothing matches. Leaves
// Proposal::looked_up and compute_seconds to the caller.
Proposal LookupProposal(const std::vector<TokenId>& ctx, int32_t k, int32_t max_ngram, int32_t min_ngram,
                        const TokenFilter* filter = nullptr);

}  // namespace specserve
