// The API edge of drafter choice: the public enum (v1::Drafter) of a
// request, the CLI's --drafter and the in-process engines, mapped onto the
// registry (coordinator/drafter_registry.h). Nothing past this edge uses the
// enum: the loop, round records, metric labels and policy seeding know a
// drafter by its registry name and id.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "coordinator/drafter_registry.h"
#include "specserve/v1/generation.pb.h"

namespace specserve {

// "model", "ngram", "none" (and "unspecified" where `allow_unspecified`).
absl::StatusOr<v1::Drafter> ParseDrafter(absl::string_view name, bool allow_unspecified = false);
// The enum value's lower-case name: a registry name, or "none", "unspecified".
std::string DrafterName(v1::Drafter kind);

// The registry entry of `kind`: the one of the same name (DRAFTER_MODEL is
// "model", DRAFTER_NGRAM "ngram"); null for DRAFTER_NONE (plain decoding).
// DRAFTER_UNSPECIFIED is the caller's to resolve (the request plan); here
// it is the fallback.
const DrafterEntry* DrafterFor(v1::Drafter kind);

}  // namespace specserve
