#include "coordinator/request_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace specserve {

absl::StatusOr<Plan> PlanRequest(const v1::GenerateRequest& req, const CoordinatorOptions& opts,
                                 const Tokenizer& tokenizer, const ModelConfig& config, bool draft_configured,
                                 const constrain::GrammarCompiler* grammar) {
  Plan plan;
  SessionSpec& spec = plan.spec;
  if (req.has_token_ids()) {
    spec.prompt.assign(req.token_ids().ids().begin(), req.token_ids().ids().end());
  } else if (!req.text().empty()) {
    if (static_cast<int64_t>(req.text().size()) > opts.max_prompt_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("prompt of ", req.text().size(), " bytes is over the limit of ",
                                                     opts.max_prompt_bytes, " (--max-prompt-bytes)"));
    }
    spec.prompt = tokenizer.Encode(req.text(), /*add_bos=*/true);
  }
  if (spec.prompt.empty()) return absl::InvalidArgumentError("empty prompt");
  const int64_t room = config.n_ctx - static_cast<int64_t>(spec.prompt.size());
  if (room <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("prompt of ", spec.prompt.size(), " tokens leaves no room in the context of ",
                                                   config.n_ctx));
  }
  if (req.has_max_tokens()) {
    if (req.max_tokens() < 0 || req.max_tokens() > room) {
      return absl::InvalidArgumentError(absl::StrCat("max_tokens ", req.max_tokens(), " not in [0, ", room,
                                                     "] (context ", config.n_ctx, " minus a prompt of ",
                                                     spec.prompt.size(), " tokens)"));
    }
    spec.max_new_tokens = req.max_tokens();
  } else {
    spec.max_new_tokens = static_cast<int32_t>(std::min<int64_t>(opts.default_max_tokens, room));
  }
  spec.target.temperature = req.temperature();
  spec.target.top_k = req.top_k();
  spec.target.top_p = req.top_p() == 0 ? 1.0f : req.top_p();
  spec.target.seed = req.seed();
  spec.target.min_p = req.min_p();
  // The draft samples at the user's temperature (closer q, higher acceptance);
  // verification stays exact for any q.
  spec.draft.temperature = spec.target.temperature;
  spec.draft.lookup_min_ngram = opts.draft_lookup;
  if (req.top_logprobs() < 0 || req.top_logprobs() > kMaxTopLogprobs) {
    return absl::InvalidArgumentError(absl::StrCat("top_logprobs ", req.top_logprobs(), " not in [0, ", kMaxTopLogprobs, "]"));
  }
  if (req.top_logprobs() > 0 && !req.logprobs()) {
    return absl::InvalidArgumentError("top_logprobs needs logprobs");
  }
  spec.logprobs = req.logprobs();
  spec.top_logprobs = req.top_logprobs();
  LogitRules& rules = spec.rules;
  for (const auto& [id, bias] : req.logit_bias()) rules.logit_bias.emplace_back(id, bias);
  std::sort(rules.logit_bias.begin(), rules.logit_bias.end());  // a proto map has no order
  rules.presence_penalty = req.presence_penalty();
  rules.frequency_penalty = req.frequency_penalty();
  if (req.min_tokens() < 0 || req.min_tokens() > spec.max_new_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_tokens ", req.min_tokens(), " not in [0, ", spec.max_new_tokens, "] (max_tokens)"));
  }
  rules.min_tokens = req.min_tokens();
  rules.ignore_eos = req.ignore_eos();
  if (rules.min_tokens > 0 || rules.ignore_eos) rules.eos_ids = {tokenizer.eos()};
  if (!req.json_schema().empty()) {
    if (grammar == nullptr) return absl::InvalidArgumentError("json_schema: structured output is not available here");
    // The document ends the output: the end-of-sequence token or a stop
    // token id follows it (ids outside the vocabulary are refused below).
    rules.eos_ids = {tokenizer.eos()};
    for (int32_t id : req.stop_token_ids()) {
      if (id >= 0 && id < config.vocab && id != tokenizer.eos()) rules.eos_ids.push_back(id);
    }
    rules.grammar = req.json_schema();
    absl::StatusOr<std::shared_ptr<const TokenFilter>> filter = grammar->Compile(rules.grammar, rules.eos_ids);
    if (!filter.ok()) {
      return absl::Status(filter.status().code(), absl::StrCat("json_schema: ", filter.status().message()));
    }
    rules.filter = *std::move(filter);
  }
  RETURN_IF_ERROR(ValidateSessionSpec(spec, config));

  int k = opts.default_k;
  if (req.speculation_case() == v1::GenerateRequest::kK) {
    if (req.k() < 0 || req.k() > KPolicy::kMax) {
      return absl::InvalidArgumentError(absl::StrCat("k ", req.k(), " not in [0, ", KPolicy::kMax, "]"));
    }
    k = req.k();
  } else if (req.speculation_case() == v1::GenerateRequest::kAdaptiveK && req.adaptive_k()) {
    k = -1;
  }
  plan.k = k < 0 ? KPolicy::Adaptive() : KPolicy::Fixed(k);
  plan.k.DisableAtSessions(opts.speculation_max_sessions);

  if (req.stop_size() > opts.max_stop_strings) {
    return absl::InvalidArgumentError(absl::StrCat(req.stop_size(), " stop strings (at most ", opts.max_stop_strings, ")"));
  }
  for (const std::string& s : req.stop()) {
    if (static_cast<int>(s.size()) > opts.max_stop_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("a stop string of ", s.size(), " bytes (at most ", opts.max_stop_bytes, ")"));
    }
    plan.stops.push_back(s);
  }
  if (req.stop_token_ids_size() > opts.max_stop_token_ids) {
    return absl::InvalidArgumentError(
        absl::StrCat(req.stop_token_ids_size(), " stop token ids (at most ", opts.max_stop_token_ids, ")"));
  }
  for (int32_t id : req.stop_token_ids()) {
    if (id < 0 || id >= config.vocab) {
      return absl::InvalidArgumentError(absl::StrCat("stop token id ", id, " not in [0, ", config.vocab, ")"));
    }
    plan.stop_token_ids.push_back(id);
  }
  // min_tokens holds the stop token ids back too (vLLM's rule).
  if (spec.rules.min_tokens > 0) spec.rules.stop_ids = plan.stop_token_ids;
  if (!v1::Drafter_IsValid(req.drafter())) return absl::InvalidArgumentError("unknown drafter");
  plan.drafter = req.drafter();
  if (plan.drafter == v1::DRAFTER_UNSPECIFIED) plan.drafter = draft_configured ? v1::DRAFTER_MODEL : v1::DRAFTER_NGRAM;
  if (k == 0) plan.drafter = v1::DRAFTER_NONE;
  return plan;
}

}  // namespace specserve
