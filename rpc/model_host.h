// A model service's model: the GGUF loaded, its backend built, its
// description (tokenizer included) for GetModelInfo, and the grammar
// compiler over its vocabulary for constrained sessions.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "common/backend.h"
#include "common/weights.h"
#include "constrain/grammar_compiler.h"
#include "spec/round.h"
#include "rpc/service_flags.h"
#include "specserve/v1/internal.pb.h"

namespace specserve::rpc {

struct ModelHost {
  std::unique_ptr<Model> model;
  std::unique_ptr<Backend> backend;
  v1::ModelInfo info;
  // Null when the model's tokenizer does not load (sessions with a grammar
  // are then refused).
  std::unique_ptr<constrain::GrammarCompiler> grammar;

  static absl::StatusOr<std::unique_ptr<ModelHost>> Load(const ServiceFlags& flags);

  // A session's grammar source (spec->rules.grammar) compiled into its
  // filter, ended by rules.eos_ids; nothing to do without a grammar.
  // INVALID_ARGUMENT naming `grammar` when it does not compile here.
  absl::Status CompileGrammar(SessionSpec* spec) const;
};

}  // namespace specserve::rpc
