// The drafter kinds, named once. The public API's enum (v1::Drafter) is the
// key everywhere a kind is chosen: a request, the CLI's --drafter, the
// in-process engines and the coordinator; these are its names and the one
// factory that makes a drafter of each kind.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "coordinator/roles.h"
#include "specserve/v1/generation.pb.h"

namespace specserve {

// "model", "ngram", "none" (and "unspecified" where `allow_unspecified`).
absl::StatusOr<v1::Drafter> ParseDrafter(absl::string_view name, bool allow_unspecified = false);
std::string DrafterName(v1::Drafter kind);

// Makes the model drafter (in process: on the draft backend; in the
// coordinator: on the draft service), or null when no draft model is reachable.
using ModelDrafterFactory = std::function<std::unique_ptr<Drafter>()>;

// The drafter of `kind` (not UNSPECIFIED: the caller resolves it): NONE is
// null (plain decoding), NGRAM the n-gram drafter, MODEL `make_model()` or,
// when that is null, the n-gram drafter standing in (`*model_missing` set).
std::unique_ptr<Drafter> MakeDrafter(v1::Drafter kind, const ModelDrafterFactory& make_model, bool* model_missing);

// What replaces a failed drafter: the n-gram drafter (prompt lookup in the
// coordinator; exact like any drafter).
std::unique_ptr<Drafter> MakeFallbackDrafter();

}  // namespace specserve
