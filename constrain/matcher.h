// Follows a Grammar byte by byte. The state is a set of parse stacks (each a
// path through the rules: return states below, the current state on top),
// kept canonical (sorted, deduplicated, every top a state that reads a byte)
// so that equal states compare and hash equal. A copy is a fork: callers copy
// a matcher to try drafts and drop the copy to roll back.
//
// Bounds: a stack deeper than limits.max_stack_depth is dropped (the input
// would nest deeper than allowed); more than limits.max_stacks live stacks
// keep the first ones in sorted order (deterministic; an ambiguity that wide
// needs a pathological grammar). Both narrow what is accepted, never widen it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "constrain/grammar.h"

namespace specserve::constrain {

class GrammarMatcher {
 public:
  // At the start of the root rule (rule 0), or of `start_rule`.
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar, int32_t start_rule = 0);

  // Moves past `b`; false (and the state unchanged) when no parse allows it.
  bool AcceptByte(uint8_t b);
  // AcceptByte over every byte of `bytes`; false (state unchanged) if one fails.
  bool AcceptBytes(const std::string& bytes);
  // The root rule has ended on some parse: the document is finished.
  bool IsComplete() const { return complete_; }
  // Some parse can read a further byte.
  bool CanContinue() const { return !stacks_.empty(); }

  // The state as integers (stack sizes and states, then the completion
  // flag): equal for equal states, a cache key.
  std::vector<int32_t> StateKey() const;
  const std::shared_ptr<const Grammar>& grammar() const { return grammar_; }

 private:
  using Stack = std::vector<int32_t>;
  // Adds every byte-reading configuration reachable from `stack` without
  // input to `out`, and sets *complete when the root rule can end.
  void Close(Stack stack, std::vector<Stack>* out, bool* complete) const;
  void Canonicalize(std::vector<Stack>* stacks) const;

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Stack> stacks_;
  bool complete_ = false;
};

}  // namespace specserve::constrain
