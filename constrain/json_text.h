// Fragments for the text of JSON strings: sets of characters as they are
// written inside quotes, and regular expressions (the ECMA subset JSON Schema
// patterns use) over a string's characters. Every character is written one
// way: unescaped, except '"' and '\' (written \" and \\) and control
// characters (\n, \t, \r, \b, \f or \u00XX); so a pattern fragment accepts
// a subset of the encodings of the matching strings, never a wider set.
#pragma once

#include <bitset>
#include <string>

#include "absl/status/statusor.h"
#include "constrain/grammar.h"

namespace specserve::constrain {

struct CharSet {
  std::bitset<128> ascii;
  bool non_ascii = false;  // every well-formed UTF-8 character >= U+0080
};

// Exactly one character of `set`, encoded as above. `any_escape` also
// admits every JSON escape (\/, and \uXXXX for any non-surrogate XXXX): the
// characters of an unconstrained string, where the encoding does not matter.
Frag CharSetFrag(GrammarBuilder* b, const CharSet& set, bool any_escape = false);
// One well-formed UTF-8 character >= U+0080 (2 to 4 bytes).
Frag NonAsciiFrag(GrammarBuilder* b);

// The characters of a string that `pattern` matches, searched as JSON Schema
// does (unanchored unless the pattern starts with ^ / ends with $).
// INVALID_ARGUMENT for what is not regular or not supported (backreferences,
// lookaround, word boundaries, anchors inside the pattern), naming it.
absl::StatusOr<Frag> PatternFrag(GrammarBuilder* b, const std::string& pattern);

}  // namespace specserve::constrain
