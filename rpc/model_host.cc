#include "rpc/model_host.h"

#include "backends/make_backend.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tokenizer.h"
#include "rpc/proto_convert.h"

namespace specserve::rpc {

absl::StatusOr<std::unique_ptr<ModelHost>> ModelHost::Load(const ServiceFlags& flags) {
  auto h = std::make_unique<ModelHost>();
  ASSIGN_OR_RETURN(h->model, Model::Load(flags.model));
  ASSIGN_OR_RETURN(h->backend, MakeBackend(*h->model, flags.backend));
  if (flags.prefix_cache) h->backend->kv_pool().EnablePrefixCache();
  const ModelConfig& c = h->model->config;
  v1::ModelInfo& info = h->info;
  info.set_name(c.name);
  info.set_arch(c.arch);
  info.set_vocab_size(c.vocab);
  info.set_context_length(c.n_ctx);
  info.set_backend(h->backend->name());
  info.set_max_sessions(flags.max_sessions);
  info.set_kv_blocks(h->backend->kv_pool().num_blocks());
  info.set_kv_block_size(h->backend->kv_pool().block_size());
  // A vocabulary that cannot travel still leaves the service usable by a
  // coordinator that sends token ids; the coordinator says why it cannot.
  if (absl::StatusOr<v1::TokenizerInfo> tok = TokenizerInfoFromGguf(*h->model->file); tok.ok()) {
    *info.mutable_tokenizer() = std::move(*tok);
  } else {
    info.mutable_tokenizer()->set_model(h->model->file->GetString("tokenizer.ggml.model").value_or("unknown"));
  }
  if (absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::FromGguf(*h->model->file); tok.ok()) {
    h->grammar = std::make_unique<constrain::GrammarCompiler>(**tok);
  }
  // What a coordinator needs to render chat requests (coordinator/chat_prompt.h).
  const GgufFile& f = *h->model->file;
  info.set_chat_template(f.GetString("tokenizer.chat_template").value_or(""));
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    absl::StatusOr<int64_t> id = f.GetInt(key);
    if (id.ok() && *id >= 0 && *id < c.vocab) info.add_end_of_turn_ids(static_cast<int32_t>(*id));
  }
  return h;
}

absl::Status ModelHost::CompileGrammar(SessionSpec* spec) const {
  LogitRules& rules = spec->rules;
  if (rules.grammar.empty() || rules.filter != nullptr) return absl::OkStatus();
  if (grammar == nullptr) return absl::InvalidArgumentError("grammar: this model's tokenizer does not load");
  absl::StatusOr<std::shared_ptr<const TokenFilter>> filter = grammar->Compile(rules.grammar, rules.eos_ids);
  if (!filter.ok()) return absl::Status(filter.status().code(), absl::StrCat("grammar: ", filter.status().message()));
  rules.filter = *std::move(filter);
  return absl::OkStatus();
}

}  // namespace specserve::rpc
