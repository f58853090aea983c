#include "constrain/matcher.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"

namespace specserve::constrain {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, int32_t start_rule)
    : grammar_(std::move(grammar)) {
  Close(Stack{grammar_->rule_start[start_rule]}, &stacks_, &complete_);
  Canonicalize(&stacks_);
}

void GrammarMatcher::Close(Stack start, std::vector<Stack>* out, bool* complete) const {
  // Depth-first over epsilon moves, calls and returns; `seen` stops epsilon
  // cycles, the depth bound stops left recursion.
  const auto& states = grammar_->states;
  const size_t max_depth = static_cast<size_t>(grammar_->limits.max_stack_depth);
  absl::flat_hash_set<Stack> seen;
  std::vector<Stack> work;
  work.push_back(std::move(start));
  while (!work.empty()) {
    Stack st = std::move(work.back());
    work.pop_back();
    if (st.size() > max_depth || !seen.insert(st).second) continue;
    const GrammarState& s = states[st.back()];
    if (!s.bytes.empty()) out->push_back(st);
    for (const int32_t e : s.eps) {
      Stack next = st;
      next.back() = e;
      work.push_back(std::move(next));
    }
    for (const CallEdge& c : s.calls) {
      Stack next = st;
      next.back() = c.ret;
      next.push_back(grammar_->rule_start[c.rule]);
      work.push_back(std::move(next));
    }
    if (s.rule_end) {
      if (st.size() == 1) {
        *complete = true;
      } else {
        Stack next = st;
        next.pop_back();
        work.push_back(std::move(next));
      }
    }
  }
}

void GrammarMatcher::Canonicalize(std::vector<Stack>* stacks) const {
  std::sort(stacks->begin(), stacks->end());
  stacks->erase(std::unique(stacks->begin(), stacks->end()), stacks->end());
  const size_t max_stacks = static_cast<size_t>(grammar_->limits.max_stacks);
  if (stacks->size() > max_stacks) stacks->resize(max_stacks);
}

bool GrammarMatcher::AcceptByte(uint8_t b) {
  const auto& states = grammar_->states;
  std::vector<Stack> next;
  bool complete = false;
  for (const Stack& st : stacks_) {
    for (const ByteEdge& e : states[st.back()].bytes) {
      if (b < e.lo || b > e.hi) continue;
      Stack moved = st;
      moved.back() = e.to;
      Close(std::move(moved), &next, &complete);
    }
  }
  if (next.empty() && !complete) return false;
  Canonicalize(&next);
  stacks_ = std::move(next);
  complete_ = complete;
  return true;
}

bool GrammarMatcher::AcceptBytes(const std::string& bytes) {
  GrammarMatcher copy = *this;
  for (const char c : bytes) {
    if (!copy.AcceptByte(static_cast<uint8_t>(c))) return false;
  }
  *this = std::move(copy);
  return true;
}

std::vector<int32_t> GrammarMatcher::StateKey() const {
  std::vector<int32_t> key;
  for (const Stack& st : stacks_) {
    key.push_back(static_cast<int32_t>(st.size()));
    key.insert(key.end(), st.begin(), st.end());
  }
  key.push_back(complete_ ? -1 : -2);
  return key;
}

}  // namespace specserve::constrain
