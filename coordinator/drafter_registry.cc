#include "coordinator/drafter_registry.h"

#include <vector>

#include "coordinator/ngram_drafter.h"

namespace specserve {
namespace {

std::unique_ptr<Drafter> MakeModel(const DrafterEnv& env) { return env.draft_model ? env.draft_model() : nullptr; }
std::unique_ptr<Drafter> MakeNgram(const DrafterEnv&) { return std::make_unique<NgramDrafter>(); }

// The registrations, one entry per drafter.
std::vector<DrafterEntry> Registered() {
  return {
      {kModelDrafterName, {.remote = true, .drafts_ahead = true}, MakeModel},
      {kNgramDrafterName, {}, MakeNgram},
  };
}

}  // namespace

absl::Span<const DrafterEntry> Drafters() {
  static const std::vector<DrafterEntry>* const all = [] {
    auto* v = new std::vector<DrafterEntry>(Registered());
    for (size_t i = 0; i < v->size(); ++i) (*v)[i].id = static_cast<int>(i);
    return v;
  }();
  return *all;
}

const DrafterEntry* FindDrafter(absl::string_view name) {
  for (const DrafterEntry& e : Drafters()) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

const DrafterEntry& FallbackDrafter() {
  static const DrafterEntry* const fallback = FindDrafter(kNgramDrafterName);
  return *fallback;
}

std::unique_ptr<Drafter> MakeFallbackDrafter() { return FallbackDrafter().make(DrafterEnv{}); }

MadeDrafter MakeDrafter(const DrafterEntry* asked, const DrafterEnv& env) {
  MadeDrafter made;
  if (asked == nullptr) return made;
  const bool env_fits = (!asked->caps.remote || env.draft_model) &&
                        (!asked->caps.needs_target_features || env.target_features);
  if (env_fits) made.drafter = asked->make(env);
  if (made.drafter) {
    made.entry = asked;
    return made;
  }
  made.stood_in = true;
  made.entry = &FallbackDrafter();
  made.drafter = MakeFallbackDrafter();
  return made;
}

}  // namespace specserve
