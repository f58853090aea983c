#include "coordinator/drafters.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "coordinator/ngram_drafter.h"

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

std::unique_ptr<Drafter> MakeDrafter(v1::Drafter kind, const ModelDrafterFactory& make_model, bool* model_missing) {
  *model_missing = false;
  if (kind == v1::DRAFTER_NONE) return nullptr;
  if (kind == v1::DRAFTER_MODEL) {
    if (std::unique_ptr<Drafter> d = make_model ? make_model() : nullptr) return d;
    *model_missing = true;
  }
  return MakeFallbackDrafter();
}

std::unique_ptr<Drafter> MakeFallbackDrafter() { return std::make_unique<NgramDrafter>(); }

}  // namespace specserve
