// JSON Schema to a Grammar, for the subset OpenAI's strict structured outputs
// accept (docs/structured_output.md lists it). The grammar generates a subset
// of the schema's valid documents, chosen so every generated document
// validates:
//  - objects: the listed properties in the schema's order, required ones
//    always, optional ones may be skipped; no other properties
//    (additionalProperties false or absent). An object schema without
//    "properties" (and no additionalProperties: false) is any JSON object.
//  - strings: characters written one way (constrain/json_text.h); lengths
//    count characters; \u escapes never write surrogates; formats date, time,
//    date-time, email, uuid as regular approximations (dates with days valid
//    in every year; Feb 29 is left out); patterns: the regular ECMA subset.
//  - integers: written without exponent or fraction, at most 16 digits;
//    minimum / maximum / exclusive* bounds are enforced exactly, by digits.
//  - numbers without bounds: -?(0|[1-9]d{0,15})(.d{1,15})?([eE][+-]?d{1,2})?;
//    with bounds: the integers in range, and k.ddd with the whole interval
//    [k, k+1) (or (-k-1, -k]) inside the bounds (an under-approximation:
//    e.g. 0.5 under maximum 0.7 is not generated).
//  - whitespace between tokens, and before and after the document: none,
//    one space, or a newline and up to 16 spaces (bounded, so a model cannot
//    loop on whitespace).
// Errors: INVALID_ARGUMENT naming an unsupported keyword or a bad value and
// its JSON pointer; RESOURCE_EXHAUSTED when the grammar would pass
// GrammarLimits (states, rules, nesting).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "constrain/grammar.h"
#include "nlohmann/json.hpp"

namespace specserve::constrain {

// Properties are written in `schema`'s key order, so parse schemas as
// ordered_json (or pass the text).
absl::StatusOr<std::shared_ptr<const Grammar>> CompileJsonSchema(const nlohmann::ordered_json& schema,
                                                                 const GrammarLimits& limits = {});
// Schema text (JSON); INVALID_ARGUMENT when it does not parse.
absl::StatusOr<std::shared_ptr<const Grammar>> CompileJsonSchemaText(absl::string_view text,
                                                                     const GrammarLimits& limits = {});
// A plain nlohmann::json has lost the key order: properties come in
// alphabetical order then.
absl::StatusOr<std::shared_ptr<const Grammar>> CompileJsonSchema(const nlohmann::json& schema,
                                                                 const GrammarLimits& limits = {});

// OpenAI's {"type": "json_object"} mode: any JSON object.
absl::StatusOr<std::shared_ptr<const Grammar>> CompileAnyJsonObject(const GrammarLimits& limits = {});

}  // namespace specserve::constrain
