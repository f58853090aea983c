// The TokenFilter (spec/token_filter.h) of a compiled grammar: what the
// sampling layer holds per followed sequence. It includes only that
// interface header (no spec/ library is linked).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "constrain/token_mask.h"
#include "spec/token_filter.h"

namespace specserve::constrain {

class GrammarTokenFilter final : public TokenFilter {
 public:
  explicit GrammarTokenFilter(TokenMatcher m) : m_(std::move(m)) {}
  std::unique_ptr<TokenFilter> Clone() const override { return std::make_unique<GrammarTokenFilter>(m_); }
  void Mask(float* logits, int32_t vocab) override { m_.Apply(logits, vocab); }
  absl::Status Advance(int32_t token) override { return m_.Accept(token); }
  const TokenMatcher& matcher() const { return m_; }

 private:
  TokenMatcher m_;
};

// A filter at the start of a document of `grammar`. `cache` may be null;
// share one per (grammar, vocabulary), e.g. per request.
inline std::unique_ptr<TokenFilter> MakeGrammarFilter(std::shared_ptr<const Grammar> grammar,
                                                      std::shared_ptr<const TokenVocabulary> vocab,
                                                      std::vector<int32_t> eos_ids,
                                                      std::shared_ptr<MaskCache> cache) {
  return std::make_unique<GrammarTokenFilter>(
      TokenMatcher(std::move(grammar), std::move(vocab), std::move(eos_ids), std::move(cache)));
}

}  // namespace specserve::constrain
