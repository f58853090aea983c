#include "constrain/grammar.h"

#include <utility>

namespace specserve::constrain {

GrammarBuilder::GrammarBuilder(const GrammarLimits& limits) : limits_(limits) {
  g_.limits = limits;
  g_.states.emplace_back();  // state 0: the scratch state handed out on overflow
}

int32_t GrammarBuilder::NewState() {
  if (overflow_ || static_cast<int64_t>(g_.states.size()) >= limits_.max_states) {
    overflow_ = true;
    return 0;
  }
  g_.states.emplace_back();
  return static_cast<int32_t>(g_.states.size() - 1);
}

void GrammarBuilder::Eps(int32_t from, int32_t to) {
  if (overflow_) return;
  g_.states[from].eps.push_back(to);
}

void GrammarBuilder::Byte(int32_t from, uint8_t lo, uint8_t hi, int32_t to) {
  if (overflow_) return;
  g_.states[from].bytes.push_back({lo, hi, to});
}

Frag GrammarBuilder::Empty() {
  const int32_t s = NewState();
  return {s, s};
}

Frag GrammarBuilder::Literal(const std::string& bytes) {
  const int32_t in = NewState();
  int32_t cur = in;
  for (const char c : bytes) {
    if (overflow_) break;
    const int32_t next = NewState();
    Byte(cur, static_cast<uint8_t>(c), static_cast<uint8_t>(c), next);
    cur = next;
  }
  return {in, cur};
}

Frag GrammarBuilder::Range(uint8_t lo, uint8_t hi) {
  const int32_t in = NewState();
  const int32_t out = NewState();
  Byte(in, lo, hi, out);
  return {in, out};
}

Frag GrammarBuilder::Seq(Frag a, Frag b) {
  Eps(a.out, b.in);
  return {a.in, b.out};
}

Frag GrammarBuilder::Seq(const std::vector<Frag>& parts) {
  if (parts.empty()) return Empty();
  Frag f = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) f = Seq(f, parts[i]);
  return f;
}

Frag GrammarBuilder::Alt(const std::vector<Frag>& alts) {
  const int32_t in = NewState();
  const int32_t out = NewState();
  for (const Frag& a : alts) {
    Eps(in, a.in);
    Eps(a.out, out);
  }
  return {in, out};
}

Frag GrammarBuilder::Opt(Frag a) {
  const int32_t in = NewState();
  const int32_t out = NewState();
  Eps(in, a.in);
  Eps(a.out, out);
  Eps(in, out);
  return {in, out};
}

Frag GrammarBuilder::Star(Frag a) {
  const int32_t in = NewState();
  const int32_t out = NewState();
  Eps(in, a.in);
  Eps(a.out, in);
  Eps(in, out);
  return {in, out};
}

Frag GrammarBuilder::Repeat(const std::function<Frag()>& make, int64_t min, int64_t max) {
  Frag f = Empty();
  for (int64_t i = 0; i < min && !overflow_; ++i) f = Seq(f, make());
  if (max < 0) return Seq(f, Star(make()));
  // Optional tail copies, each able to jump straight to the end.
  const int32_t out = NewState();
  for (int64_t i = min; i < max && !overflow_; ++i) {
    Eps(f.out, out);
    f = Seq(f, make());
  }
  Eps(f.out, out);
  return {f.in, out};
}

int32_t GrammarBuilder::NewRule() {
  if (static_cast<int64_t>(g_.rule_start.size()) >= limits_.max_rules) overflow_ = true;
  const int32_t start = NewState();
  const int32_t end = NewState();
  if (!overflow_) g_.states[end].rule_end = true;
  g_.rule_start.push_back(start);
  rule_end_.push_back(end);
  rule_defined_.push_back(false);
  return static_cast<int32_t>(g_.rule_start.size() - 1);
}

bool GrammarBuilder::rule_defined(int32_t rule) const { return rule_defined_[rule]; }

void GrammarBuilder::SetRuleBody(int32_t rule, Frag body) {
  Eps(g_.rule_start[rule], body.in);
  Eps(body.out, rule_end_[rule]);
  rule_defined_[rule] = true;
}

Frag GrammarBuilder::Call(int32_t rule) {
  const int32_t in = NewState();
  const int32_t out = NewState();
  if (!overflow_) g_.states[in].calls.push_back({rule, out});
  return {in, out};
}

Grammar GrammarBuilder::Finish(std::string description) {
  g_.description = std::move(description);
  return std::move(g_);
}

}  // namespace specserve::constrain
