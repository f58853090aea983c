// What a service or the coordinator holds to turn a request's grammar source
// (LogitRules::grammar: a JSON Schema's text; {"type": "object"} is any
// JSON object) into the token filter at the start of the output, for one
// model's vocabulary. The vocabulary trie is built once, here; each
// compiled grammar gets its own mask cache, shared by every sequence that
// follows it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/tokenizer.h"
#include "constrain/grammar.h"
#include "constrain/token_mask.h"
#include "spec/token_filter.h"

namespace specserve::constrain {

class GrammarCompiler {
 public:
  explicit GrammarCompiler(const Tokenizer& tokenizer, GrammarLimits limits = {})
      : vocab_(TokenVocabulary::FromTokenizer(tokenizer)), limits_(limits) {}

  // `end_ids`: the tokens that end the output, allowed exactly when the
  // document is complete. INVALID_ARGUMENT naming the schema's problem (or
  // text that is not JSON), RESOURCE_EXHAUSTED for a grammar past the limits.
  absl::StatusOr<std::shared_ptr<const TokenFilter>> Compile(absl::string_view schema_text,
                                                             std::vector<int32_t> end_ids) const;

  int32_t vocab_size() const { return vocab_->vocab_size(); }

 private:
  std::shared_ptr<const TokenVocabulary> vocab_;
  GrammarLimits limits_;
};

}  // namespace specserve::constrain
