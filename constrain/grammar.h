// A compiled grammar: a recursive transition network over bytes. Each rule
// is a small NFA whose edges read one byte from a range, move without input
// (epsilon), or call another rule and continue at a return state once the
// callee reaches its end. Strings and numbers are regular (plain edges);
// objects, arrays and $ref recursion use calls, so a matcher (matcher.h)
// follows it with a stack. Built by GrammarBuilder; immutable once built and
// shared (std::shared_ptr<const Grammar>) by every matcher of a request.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace specserve::constrain {

// Bounds on a compiled grammar and on matching it, so that a schema that
// explodes is refused (RESOURCE_EXHAUSTED) within bounded time and memory.
struct GrammarLimits {
  int32_t max_states = 250000;   // NFA states over all rules
  int32_t max_rules = 20000;     // rules ($ref targets, array items, values)
  int32_t max_schema_depth = 64;  // nesting of schema nodes while compiling
  int32_t max_stack_depth = 128;  // rule calls open at once while matching
  int32_t max_stacks = 128;      // live parse stacks of a matcher (ambiguity)
};

struct ByteEdge {
  uint8_t lo, hi;  // reads one byte b with lo <= b <= hi
  int32_t to;
};
struct CallEdge {
  int32_t rule;  // callee
  int32_t ret;   // state to continue at once the callee ends
};

struct GrammarState {
  std::vector<ByteEdge> bytes;
  std::vector<int32_t> eps;
  std::vector<CallEdge> calls;
  bool rule_end = false;  // the end of its rule: return to the caller
};

struct Grammar {
  std::vector<GrammarState> states;
  std::vector<int32_t> rule_start;  // per rule; rule 0 is the root
  GrammarLimits limits;
  std::string description;  // what was compiled, for logs ("json_schema", ...)
};

// An NFA fragment under construction: enter at `in`, leave from `out`.
struct Frag {
  int32_t in, out;
};

// Builds a Grammar. State creation past limits.max_states sets overflow()
// and returns a scratch state, so callers may keep going and check
// overflow() at their checkpoints; nothing it builds is used then.
class GrammarBuilder {
 public:
  explicit GrammarBuilder(const GrammarLimits& limits);
  bool overflow() const { return overflow_; }
  int32_t num_states() const { return static_cast<int32_t>(g_.states.size()); }

  int32_t NewState();
  void Eps(int32_t from, int32_t to);
  void Byte(int32_t from, uint8_t lo, uint8_t hi, int32_t to);

  Frag Empty();
  Frag Literal(const std::string& bytes);
  Frag Range(uint8_t lo, uint8_t hi);
  Frag Seq(Frag a, Frag b);
  Frag Seq(const std::vector<Frag>& parts);
  Frag Alt(const std::vector<Frag>& alts);
  Frag Opt(Frag a);
  Frag Star(Frag a);
  // make() min times, then (max - min) optional copies; max < 0: unbounded.
  Frag Repeat(const std::function<Frag()>& make, int64_t min, int64_t max);

  // Rules: NewRule reserves an id (so a body may call itself), SetRuleBody
  // fills it. Call(rule) is a fragment that runs the rule once.
  int32_t NewRule();
  bool rule_defined(int32_t rule) const;
  void SetRuleBody(int32_t rule, Frag body);
  Frag Call(int32_t rule);
  int32_t num_rules() const { return static_cast<int32_t>(g_.rule_start.size()); }

  Grammar Finish(std::string description);

 private:
  GrammarLimits limits_;
  Grammar g_;
  std::vector<int32_t> rule_end_;
  std::vector<bool> rule_defined_;
  bool overflow_ = false;
};

}  // namespace specserve::constrain
