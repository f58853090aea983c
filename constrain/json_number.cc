#include "constrain/json_number.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace specserve::constrain {
namespace {

constexpr int64_t kMaxInt = 9999999999999999;  // kMaxIntDigits nines

Frag Digit(GrammarBuilder* b) { return b->Range('0', '9'); }

// Decimal strings of the same length n, from lo to hi digit by digit.
Frag SameLength(GrammarBuilder* b, const std::string& lo, const std::string& hi) {
  if (lo.empty()) return b->Empty();
  const std::string rest_lo = lo.substr(1), rest_hi = hi.substr(1);
  if (lo[0] == hi[0]) return b->Seq(b->Literal(lo.substr(0, 1)), SameLength(b, rest_lo, rest_hi));
  const std::string nines(rest_lo.size(), '9'), zeros(rest_lo.size(), '0');
  auto digits = [&] { return b->Repeat([&] { return Digit(b); }, rest_lo.size(), rest_lo.size()); };
  if (rest_lo == zeros && rest_hi == nines)
    return b->Seq(b->Range(lo[0], hi[0]), digits());
  std::vector<Frag> alts;
  alts.push_back(b->Seq(b->Literal(lo.substr(0, 1)), SameLength(b, rest_lo, nines)));
  if (lo[0] + 1 <= hi[0] - 1) alts.push_back(b->Seq(b->Range(lo[0] + 1, hi[0] - 1), digits()));
  alts.push_back(b->Seq(b->Literal(hi.substr(0, 1)), SameLength(b, zeros, rest_hi)));
  return b->Alt(alts);
}

// Non-negative integers lo..hi (lo <= hi), without leading zeros.
Frag NonNegative(GrammarBuilder* b, int64_t lo, int64_t hi) {
  std::vector<Frag> alts;
  int64_t first = 0, last = 9;  // the numbers of the current length
  for (int len = 1; len <= kMaxIntDigits && first <= hi; ++len) {
    const int64_t a = std::max(lo, first), z = std::min(hi, last);
    if (a <= z) alts.push_back(SameLength(b, std::to_string(a), std::to_string(z)));
    first = last + 1;
    last = last * 10 + 9;
  }
  return alts.size() == 1 ? alts[0] : b->Alt(alts);
}

// Integers lo..hi (lo <= hi); "-0" is not written.
Frag Integers(GrammarBuilder* b, int64_t lo, int64_t hi) {
  std::vector<Frag> alts;
  if (hi >= 0) alts.push_back(NonNegative(b, std::max<int64_t>(lo, 0), hi));
  if (lo < 0) alts.push_back(b->Seq(b->Literal("-"), NonNegative(b, std::max<int64_t>(1, -hi), -lo)));
  return alts.size() == 1 ? alts[0] : b->Alt(alts);
}

Frag Fraction(GrammarBuilder* b) {
  return b->Seq(b->Literal("."), b->Repeat([&] { return Digit(b); }, 1, 15));
}

double Clamp(double v) { return std::clamp(v, static_cast<double>(-kMaxInt), static_cast<double>(kMaxInt)); }

// The smallest integer above (or at, when inclusive) `v`; the largest below.
int64_t IntAbove(double v, bool exclusive) {
  v = Clamp(v);
  const double c = std::ceil(v);
  return static_cast<int64_t>(exclusive && c == v ? c + 1 : c);
}
int64_t IntBelow(double v, bool exclusive) {
  v = Clamp(v);
  const double f = std::floor(v);
  return static_cast<int64_t>(exclusive && f == v ? f - 1 : f);
}

absl::StatusOr<double> NumberAt(const nlohmann::json& s, const char* k) {
  if (!s[k].is_number()) return absl::InvalidArgumentError(absl::StrCat("\"", k, "\" must be a number"));
  const double v = s[k].get<double>();
  if (!std::isfinite(v)) return absl::InvalidArgumentError(absl::StrCat("\"", k, "\" must be finite"));
  return v;
}

}  // namespace

absl::StatusOr<NumberBounds> ReadBounds(const nlohmann::json& s, bool integer) {
  NumberBounds nb;
  for (const char* k : {"minimum", "maximum"}) {
    if (!s.contains(k)) continue;
    const absl::StatusOr<double> v = NumberAt(s, k);
    if (!v.ok()) return v.status();
    (k[1] == 'i' ? nb.lo : nb.hi) = *v;
    (k[1] == 'i' ? nb.has_lo : nb.has_hi) = true;
  }
  for (const char* k : {"exclusiveMinimum", "exclusiveMaximum"}) {
    if (!s.contains(k)) continue;
    const bool is_min = k[9] == 'M' && k[10] == 'i';
    if (s[k].is_boolean()) {  // draft 4: a flag on minimum / maximum
      (is_min ? nb.lo_exclusive : nb.hi_exclusive) = s[k].get<bool>();
      continue;
    }
    const absl::StatusOr<double> got = NumberAt(s, k);
    if (!got.ok()) return got.status();
    const double v = *got;
    if (is_min) {
      if (!nb.has_lo || v >= nb.lo) nb.lo = v, nb.lo_exclusive = true;
      nb.has_lo = true;
    } else {
      if (!nb.has_hi || v <= nb.hi) nb.hi = v, nb.hi_exclusive = true;
      nb.has_hi = true;
    }
  }
  return nb;
}

Frag AnyNumber(GrammarBuilder* b) {
  Frag integer = b->Alt({b->Literal("0"), b->Seq(b->Range('1', '9'), b->Repeat([&] { return Digit(b); }, 0, kMaxIntDigits - 1))});
  Frag exponent = b->Seq({b->Alt({b->Literal("e"), b->Literal("E")}), b->Opt(b->Alt({b->Literal("+"), b->Literal("-")})),
                          b->Repeat([&] { return Digit(b); }, 1, 2)});
  return b->Seq({b->Opt(b->Literal("-")), integer, b->Opt(Fraction(b)), b->Opt(exponent)});
}

absl::StatusOr<Frag> IntegerFrag(GrammarBuilder* b, const NumberBounds& nb) {
  const int64_t lo = nb.has_lo ? IntAbove(nb.lo, nb.lo_exclusive) : -kMaxInt;
  const int64_t hi = nb.has_hi ? IntBelow(nb.hi, nb.hi_exclusive) : kMaxInt;
  if (lo > hi) return absl::InvalidArgumentError("no integer of at most 16 digits satisfies the bounds");
  return Integers(b, lo, hi);
}

absl::StatusOr<Frag> NumberFrag(GrammarBuilder* b, const NumberBounds& nb) {
  if (!nb.has_lo && !nb.has_hi) return AnyNumber(b);
  std::vector<Frag> alts;
  const int64_t lo = nb.has_lo ? IntAbove(nb.lo, nb.lo_exclusive) : -kMaxInt;
  const int64_t hi = nb.has_hi ? IntBelow(nb.hi, nb.hi_exclusive) : kMaxInt;
  if (lo <= hi) alts.push_back(Integers(b, lo, hi));
  // k.ddd in [k, k+1): needs k >= lo (k > lo when exclusive) and k + 1 <= hi.
  const int64_t pos_lo = std::max<int64_t>(0, lo);
  const int64_t pos_hi = nb.has_hi ? static_cast<int64_t>(std::floor(Clamp(nb.hi))) - 1 : kMaxInt;
  if (pos_lo <= pos_hi) alts.push_back(b->Seq(NonNegative(b, pos_lo, pos_hi), Fraction(b)));
  // -k.ddd in (-k-1, -k]: needs -k-1 >= lo and -k <= hi (-k < hi when exclusive).
  const int64_t neg_lo = std::max<int64_t>(0, -hi);
  const int64_t neg_hi = nb.has_lo ? -static_cast<int64_t>(std::ceil(Clamp(nb.lo))) - 1 : kMaxInt;
  if (neg_lo <= neg_hi) alts.push_back(b->Seq({b->Literal("-"), NonNegative(b, neg_lo, neg_hi), Fraction(b)}));
  if (alts.empty()) return absl::InvalidArgumentError("no number this grammar writes satisfies the bounds");
  return alts.size() == 1 ? alts[0] : b->Alt(alts);
}

}  // namespace specserve::constrain
