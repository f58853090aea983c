#include "coordinator/drafters.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace specserve {

absl::StatusOr<v1::Drafter> ParseDrafter(absl::string_view name, bool allow_unspecified) {
  v1::Drafter kind;
  const std::string upper = absl::StrCat("DRAFTER_", absl::AsciiStrToUpper(name));
  if (v1::Drafter_Parse(upper, &kind) && (allow_unspecified || kind != v1::DRAFTER_UNSPECIFIED)) return kind;
  return absl::InvalidArgumentError(absl::StrCat("unknown drafter '", name, "' (model, ngram or none",
                                                 allow_unspecified ? ", or unspecified)" : ")"));
}

std::string DrafterName(v1::Drafter kind) {
  return absl::AsciiStrToLower(absl::StripPrefix(v1::Drafter_Name(kind), "DRAFTER_"));
}

const DrafterEntry* DrafterFor(v1::Drafter kind) {
  if (kind == v1::DRAFTER_NONE) return nullptr;
  if (const DrafterEntry* e = FindDrafter(DrafterName(kind))) return e;
  return &FallbackDrafter();
}

}  // namespace specserve
