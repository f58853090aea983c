// Fragments for JSON numbers: any number, and integers or numbers within
// JSON Schema bounds (minimum, maximum, exclusiveMinimum, exclusiveMaximum),
// written by digits so that a bound holds exactly (constrain/json_schema.h
// gives the forms generated).
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "constrain/grammar.h"
#include "nlohmann/json.hpp"

namespace specserve::constrain {

// Integers are written with at most this many digits.
inline constexpr int kMaxIntDigits = 16;

struct NumberBounds {
  bool has_lo = false, has_hi = false;
  double lo = 0, hi = 0;
  bool lo_exclusive = false, hi_exclusive = false;
};

// The bounds keywords of schema `s` (both the number and the draft-4 boolean
// forms of exclusive*); INVALID_ARGUMENT for a non-numeric bound.
absl::StatusOr<NumberBounds> ReadBounds(const nlohmann::json& s, bool integer);

// Any JSON number: -?(0|[1-9]d{0,15})(.d{1,15})?([eE][+-]?d{1,2})?
Frag AnyNumber(GrammarBuilder* b);
// Integers within `bounds` (and within 16 digits); INVALID_ARGUMENT if none.
absl::StatusOr<Frag> IntegerFrag(GrammarBuilder* b, const NumberBounds& bounds);
// Numbers within `bounds`: AnyNumber when unbounded, else the integers in
// range and k.ddd whose whole unit interval lies in range.
absl::StatusOr<Frag> NumberFrag(GrammarBuilder* b, const NumberBounds& bounds);

}  // namespace specserve::constrain
