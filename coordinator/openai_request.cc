#include "coordinator/openai_request.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/k_policy.h"
#include "coordinator/json_field.h"
#include "coordinator/openai_error.h"
#include "spec/logprobs.h"

namespace specserve::openai {
namespace {

using json = nlohmann::json;

absl::StatusOr<std::optional<double>> Number(const json& obj, const char* key, double lo, double hi) {
  const json* v = Field(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return InvalidParam(key, absl::StrCat(key, " must be a number"));
  const double d = v->get<double>();
  if (!(d >= lo && d <= hi)) return InvalidParam(key, absl::StrCat(key, " ", d, " not in [", lo, ", ", hi, "]"));
  return d;
}

bool IsInteger(const json& v) {
  return v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) &&
                                   v.get<double>() == std::floor(v.get<double>()) &&
                                   std::fabs(v.get<double>()) < 9e15);
}

int64_t AsInt(const json& v) {
  if (v.is_number_unsigned()) return static_cast<int64_t>(v.get<uint64_t>());
  if (v.is_number_integer()) return v.get<int64_t>();
  return static_cast<int64_t>(v.get<double>());
}

absl::StatusOr<std::optional<int64_t>> Integer(const json& obj, const char* key, int64_t lo, int64_t hi) {
  const json* v = Field(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!IsInteger(*v)) return InvalidParam(key, absl::StrCat(key, " must be an integer"));
  const int64_t i = AsInt(*v);
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return InvalidParam(key, absl::StrCat(key, " out of range"));
  }
  if (i < lo || i > hi) return InvalidParam(key, absl::StrCat(key, " ", i, " not in [", lo, ", ", hi, "]"));
  return i;
}

absl::StatusOr<bool> Bool(const json& obj, const char* key) {
  const json* v = Field(obj, key);
  if (v == nullptr) return false;
  if (!v->is_boolean()) return InvalidParam(key, absl::StrCat(key, " must be true or false"));
  return v->get<bool>();
}

// Token ids from a JSON array of integers.
absl::StatusOr<std::vector<int32_t>> TokenIds(const json& arr) {
  std::vector<int32_t> ids;
  for (const json& e : arr) {
    if (!IsInteger(e) || AsInt(e) < 0 || AsInt(e) > INT32_MAX) {
      return InvalidParam("prompt", "prompt token ids must be integers >= 0");
    }
    ids.push_back(static_cast<int32_t>(AsInt(e)));
  }
  return ids;
}

// prompt: a string, a list of one string, token ids, or a list of one list of token ids.
absl::Status ReadPrompt(const json& body, v1::GenerateRequest* g) {
  const json* p = Field(body, "prompt");
  if (p == nullptr) return InvalidParam("prompt", "prompt is required");
  const json* one = p;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) one = &(*p)[0];
  if (one->is_string()) {
    if (one->get_ref<const std::string&>().empty()) return InvalidParam("prompt", "prompt is empty");
    g->set_text(one->get<std::string>());
    return absl::OkStatus();
  }
  if (one->is_array() && !one->empty() && IsInteger((*one)[0])) {
    ASSIGN_OR_RETURN(std::vector<int32_t> ids, TokenIds(*one));
    g->mutable_token_ids()->mutable_ids()->Add(ids.begin(), ids.end());
    return absl::OkStatus();
  }
  if (p->is_array() && p->size() > 1 && ((*p)[0].is_string() || (*p)[0].is_array())) {
    return InvalidParam("prompt", "one prompt per request (use n for several choices)");
  }
  return InvalidParam("prompt", "prompt must be a string, a list of one string, or token ids");
}

absl::Status ReadStop(const json& body, v1::GenerateRequest* g) {
  const json* s = Field(body, "stop");
  if (s == nullptr) return absl::OkStatus();
  if (s->is_string()) {
    if (!s->get_ref<const std::string&>().empty()) g->add_stop(s->get<std::string>());
    return absl::OkStatus();
  }
  if (!s->is_array()) return InvalidParam("stop", "stop must be a string or a list of strings");
  for (const json& e : *s) {
    if (!e.is_string()) return InvalidParam("stop", "stop must be a string or a list of strings");
    if (!e.get_ref<const std::string&>().empty()) g->add_stop(e.get<std::string>());
  }
  return absl::OkStatus();
}

// The extension object: "speculative": {"drafter": "model"|"ngram"|"none", "k": 0..16 | "adaptive", "adaptive": bool}.
absl::Status ReadSpeculative(const json& body, v1::GenerateRequest* g) {
  const json* s = Field(body, "speculative");
  if (s == nullptr) return absl::OkStatus();
  if (!s->is_object()) return InvalidParam("speculative", "speculative must be an object");
  if (const json* d = Field(*s, "drafter")) {
    if (*d == "model") {
      g->set_drafter(v1::DRAFTER_MODEL);
    } else if (*d == "ngram") {
      g->set_drafter(v1::DRAFTER_NGRAM);
    } else if (*d == "none") {
      g->set_drafter(v1::DRAFTER_NONE);
    } else if (*d != "auto") {
      return InvalidParam("speculative.drafter", "speculative.drafter must be \"model\", \"ngram\", \"none\" or \"auto\"");
    }
  }
  ASSIGN_OR_RETURN(bool adaptive, Bool(*s, "adaptive"));
  if (const json* k = Field(*s, "k")) {
    if (*k == "adaptive") {
      adaptive = true;
    } else if (!IsInteger(*k) || AsInt(*k) < 0 || AsInt(*k) > KPolicy::kMax) {
      return InvalidParam("speculative.k", absl::StrCat("speculative.k must be 0..", KPolicy::kMax, " or \"adaptive\""));
    } else if (adaptive) {
      return InvalidParam("speculative.k", "speculative: give k or adaptive, not both");
    } else {
      g->set_k(static_cast<int32_t>(AsInt(*k)));
    }
  }
  if (adaptive) g->set_adaptive_k(true);
  return absl::OkStatus();
}

// Completions: "logprobs": N (0..20) alternatives per token, null or absent: none.
// Chat: "logprobs": true|false|null and "top_logprobs": 0..20, which needs
// logprobs true. Both become GenerateRequest.logprobs / top_logprobs.
absl::Status ReadLogprobs(Endpoint endpoint, const json& body, v1::GenerateRequest* g) {
  if (endpoint == Endpoint::kCompletions) {
    if (const json* top = Field(body, "top_logprobs"); top != nullptr && !(IsInteger(*top) && AsInt(*top) == 0)) {
      return InvalidParam("top_logprobs", "top_logprobs is a chat parameter: use logprobs: N for completions");
    }
    ASSIGN_OR_RETURN(std::optional<int64_t> n, Integer(body, "logprobs", 0, kMaxTopLogprobs));
    if (n) {
      g->set_logprobs(true);
      g->set_top_logprobs(static_cast<int32_t>(*n));
    }
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(bool logprobs, Bool(body, "logprobs"));
  ASSIGN_OR_RETURN(std::optional<int64_t> top, Integer(body, "top_logprobs", 0, kMaxTopLogprobs));
  if (top && *top > 0 && !logprobs) {
    return InvalidParam("top_logprobs", "top_logprobs needs logprobs: true");
  }
  g->set_logprobs(logprobs);
  g->set_top_logprobs(static_cast<int32_t>(top.value_or(0)));
  return absl::OkStatus();
}

// logit_bias: {"<token id>": bias in [-100, 100]} (OpenAI's keys are strings);
// presence_penalty, frequency_penalty in [-2, 2]; min_p in [0, 1];
// min_tokens >= 0 (against max_tokens in the request plan); ignore_eos (a
// vLLM extension). The ids are checked against the vocabulary by the plan.
absl::Status ReadConstraints(const json& body, v1::GenerateRequest* g) {
  if (const json* b = Field(body, "logit_bias")) {
    if (!b->is_object()) return InvalidParam("logit_bias", "logit_bias must be an object of token id -> bias");
    for (const auto& [key, value] : b->items()) {
      int64_t id = -1;
      const bool digits = !key.empty() && key.size() <= 10 &&
                          key.find_first_not_of("0123456789") == std::string::npos;
      if (digits) id = std::stoll(key);
      if (!digits || id > INT32_MAX) {
        return InvalidParam("logit_bias", absl::StrCat("logit_bias key \"", key.substr(0, 32), "\" is not a token id"));
      }
      if (!value.is_number() || !(value.get<double>() >= -100 && value.get<double>() <= 100)) {
        return InvalidParam("logit_bias", absl::StrCat("logit_bias of token ", id, " must be a number in [-100, 100]"));
      }
      (*g->mutable_logit_bias())[static_cast<int32_t>(id)] = value.get<float>();
    }
  }
  ASSIGN_OR_RETURN(std::optional<double> presence, Number(body, "presence_penalty", -2, 2));
  g->set_presence_penalty(static_cast<float>(presence.value_or(0)));
  ASSIGN_OR_RETURN(std::optional<double> frequency, Number(body, "frequency_penalty", -2, 2));
  g->set_frequency_penalty(static_cast<float>(frequency.value_or(0)));
  ASSIGN_OR_RETURN(std::optional<double> min_p, Number(body, "min_p", 0, 1));
  g->set_min_p(static_cast<float>(min_p.value_or(0)));
  ASSIGN_OR_RETURN(std::optional<int64_t> min_tokens, Integer(body, "min_tokens", 0, INT32_MAX));
  g->set_min_tokens(static_cast<int32_t>(min_tokens.value_or(0)));
  ASSIGN_OR_RETURN(bool ignore_eos, Bool(body, "ignore_eos"));
  g->set_ignore_eos(ignore_eos);
  return absl::OkStatus();
}

// OpenAI parameters specserve does not implement: refused, never ignored,
// when they would change the output.
absl::Status RefuseUnsupported(Endpoint endpoint, const json& body) {
  if (endpoint == Endpoint::kCompletions) {
    if (const json* s = Field(body, "suffix"); s != nullptr && !(s->is_string() && s->get_ref<const std::string&>().empty())) {
      return InvalidParam("suffix", "suffix not supported");
    }
    ASSIGN_OR_RETURN(std::optional<int64_t> best_of, Integer(body, "best_of", 1, kMaxChoices));
    if (best_of && *best_of > 1) return InvalidParam("best_of", "best_of not supported (use n)");
  }
  return absl::OkStatus();
}

// response_format (chat and completions): {"type": "text"}; {"type":
// "json_object"} (any JSON object); {"type": "json_schema", "json_schema":
// {"name": ..., "schema": {...}, "strict": ...}}, the schema enforced
// whatever `strict` says. The schema is taken from the body re-read with
// its key order kept: properties are generated in the schema's order.
absl::Status ReadResponseFormat(const json& body, const nlohmann::ordered_json& ordered, v1::GenerateRequest* g) {
  const json* f = Field(body, "response_format");
  if (f == nullptr) return absl::OkStatus();
  const json* type = f->is_object() ? Field(*f, "type") : nullptr;
  if (type == nullptr || !type->is_string()) {
    return InvalidParam("response_format", "response_format must be an object with a string \"type\"");
  }
  const std::string& t = type->get_ref<const std::string&>();
  if (t == "text") return absl::OkStatus();
  if (t == "json_object") {
    g->set_json_schema(R"({"type":"object"})");
    return absl::OkStatus();
  }
  if (t != "json_schema") {
    return InvalidParam("response_format", absl::StrCat("response_format type \"", t.substr(0, 32),
                                                        "\" is not text, json_object or json_schema"));
  }
  const json* js = Field(*f, "json_schema");
  if (js == nullptr || !js->is_object()) {
    return InvalidParam("response_format", "response_format json_schema needs a \"json_schema\" object");
  }
  const json* schema = Field(*js, "schema");
  if (schema == nullptr || !schema->is_object()) {
    return InvalidParam("response_format", "response_format json_schema needs a \"schema\" object");
  }
  g->set_json_schema(ordered["response_format"]["json_schema"]["schema"].dump());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Request> ParseRequest(Endpoint endpoint, std::string_view text) {
  json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return InvalidParam("", "the request body is not valid JSON");
  if (!body.is_object()) return InvalidParam("", "the request body must be a JSON object");
  // The same body with its objects' key order kept: schemas generate
  // properties in the order they list them.
  const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  Request r;
  r.endpoint = endpoint;
  v1::GenerateRequest& g = r.generate;
  if (const json* m = Field(body, "model")) {
    if (!m->is_string()) return InvalidParam("model", "model must be a string");
    r.model = m->get<std::string>();
  }
  if (const json* u = Field(body, "user"); u != nullptr && !u->is_string()) {
    return InvalidParam("user", "user must be a string");
  }
  RETURN_IF_ERROR(RefuseUnsupported(endpoint, body));
  if (endpoint == Endpoint::kCompletions) {
    RETURN_IF_ERROR(ReadPrompt(body, &g));
    ASSIGN_OR_RETURN(r.echo, Bool(body, "echo"));
  } else {
    ASSIGN_OR_RETURN(r.messages, ReadMessages(ordered));
    ASSIGN_OR_RETURN(r.tools, ReadTools(ordered));
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> max_tokens, Integer(body, "max_tokens", 1, INT32_MAX));
  ASSIGN_OR_RETURN(std::optional<int64_t> max_completion, Integer(body, "max_completion_tokens", 1, INT32_MAX));
  if (max_completion) max_tokens = max_completion;
  if (max_tokens) g.set_max_tokens(static_cast<int32_t>(*max_tokens));
  ASSIGN_OR_RETURN(std::optional<double> temperature, Number(body, "temperature", 0, 2));
  g.set_temperature(static_cast<float>(temperature.value_or(1.0)));
  ASSIGN_OR_RETURN(std::optional<double> top_p, Number(body, "top_p", 0, 1));
  if (top_p) {
    if (*top_p <= 0) return InvalidParam("top_p", "top_p must be in (0, 1]");
    g.set_top_p(static_cast<float>(*top_p));
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> top_k, Integer(body, "top_k", -1, INT32_MAX));
  if (top_k && *top_k > 0) g.set_top_k(static_cast<int32_t>(*top_k));
  RETURN_IF_ERROR(ReadStop(body, &g));
  ASSIGN_OR_RETURN(std::optional<int64_t> seed, Integer(body, "seed", INT64_MIN, INT64_MAX));
  if (seed) r.seed = static_cast<uint64_t>(*seed);
  ASSIGN_OR_RETURN(std::optional<int64_t> n, Integer(body, "n", 1, kMaxChoices));
  r.n = static_cast<int>(n.value_or(1));
  ASSIGN_OR_RETURN(r.stream, Bool(body, "stream"));
  if (const json* so = Field(body, "stream_options")) {
    if (!so->is_object()) return InvalidParam("stream_options", "stream_options must be an object");
    if (!r.stream) return InvalidParam("stream_options", "stream_options is only allowed with stream: true");
    ASSIGN_OR_RETURN(r.include_usage, Bool(*so, "include_usage"));
  }
  RETURN_IF_ERROR(ReadLogprobs(endpoint, body, &g));
  // The prompt's own logprobs would need the target's prefill logits.
  if (r.echo && g.logprobs()) return InvalidParam("echo", "echo with logprobs is not supported");
  RETURN_IF_ERROR(ReadSpeculative(body, &g));
  RETURN_IF_ERROR(ReadConstraints(body, &g));
  RETURN_IF_ERROR(ReadResponseFormat(body, ordered, &g));
  if (r.tools.forced()) {
    if (!g.json_schema().empty()) {
      return InvalidParam("tool_choice", "a required or named tool call cannot also have a response_format");
    }
    g.set_json_schema(ForcedCallSchema(r.tools));
  }
  if (g.min_tokens() > 0 && max_tokens && *max_tokens < g.min_tokens()) {
    return InvalidParam("min_tokens", absl::StrCat("min_tokens ", g.min_tokens(), " exceeds max_tokens ", *max_tokens));
  }
  return r;
}

std::vector<v1::GenerateRequest> ChoiceRequests(const Request& r, uint64_t drawn_seed) {
  std::vector<v1::GenerateRequest> out(r.n, r.generate);
  const uint64_t seed = r.seed.value_or(drawn_seed);
  for (int i = 0; i < r.n; ++i) out[i].set_seed(seed + static_cast<uint64_t>(i));
  return out;
}

}  // namespace specserve::openai
