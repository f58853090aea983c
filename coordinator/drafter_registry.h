// The drafters, registered once: a name, what the drafter can do and a
// factory. Inside the coordinator and the in-process engines a drafter is
// known by its entry only: its name in round records, metric labels and the
// request's stats, its id as the K policy's seeding key. The public API's
// enum (v1::Drafter) is mapped onto these at the API edge alone
// (coordinator/drafters.h). Adding a drafter touches its own files (a
// Drafter, coordinator/roles.h) and one entry in drafter_registry.cc.
#pragma once

#include <functional>
#include <memory>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "coordinator/roles.h"

namespace specserve {

struct DrafterCaps {
  // Drafts where the draft model is: in the coordinator a session on the
  // draft service, in process on the draft backend. Made from
  // DrafterEnv::draft_model; where none is reachable the fallback stands in.
  bool remote = false;
  // Its drafting costs time the target's verify can hide: the loop drafts
  // the next block meanwhile (LoopOptions::overlap).
  bool drafts_ahead = false;
  // Needs the target's hidden features with each verdict (a self-speculation
  // head); made only where DrafterEnv::target_features.
  bool needs_target_features = false;
};

// What the process making a drafter offers the factories.
struct DrafterEnv {
  // A session on the draft model (on the draft service, or in process on the
  // draft backend); unset, or returning null, where none is reachable.
  std::function<std::unique_ptr<Drafter>()> draft_model;
  // The verifier sends the target's hidden features with each verdict.
  bool target_features = false;
};

struct DrafterEntry {
  absl::string_view name;  // lower case: "model", "ngram"
  DrafterCaps caps;
  // Null when it cannot be made from `env` (MakeDrafter checks the caps first).
  std::unique_ptr<Drafter> (*make)(const DrafterEnv& env) = nullptr;
  int id = 0;  // its position in the registry: a small key, stable within one process
};

// Every registered drafter, in registration order (entry i has id i).
absl::Span<const DrafterEntry> Drafters();
// Null when no drafter has that name.
const DrafterEntry* FindDrafter(absl::string_view name);
// What replaces a failed drafter: prompt lookup alone ("ngram"; needs
// nothing, exact like any drafter).
const DrafterEntry& FallbackDrafter();
std::unique_ptr<Drafter> MakeFallbackDrafter();

struct MadeDrafter {
  std::unique_ptr<Drafter> drafter;     // null: plain decoding
  const DrafterEntry* entry = nullptr;  // the entry `drafter` was made from; null with it
  bool stood_in = false;                // the one asked for could not be made: the fallback stands in
};

// The drafter `asked` names (null: none, plain decoding), or the fallback
// where `env` lacks what its caps need or its factory returns null.
MadeDrafter MakeDrafter(const DrafterEntry* asked, const DrafterEnv& env);

}  // namespace specserve
