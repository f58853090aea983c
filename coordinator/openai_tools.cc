#include "coordinator/openai_tools.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "coordinator/json_field.h"
#include "coordinator/openai_error.h"

namespace specserve::openai {
namespace {

using ojson = nlohmann::ordered_json;

// OpenAI's limits on a request's functions.
constexpr size_t kMaxTools = 128;
constexpr size_t kMaxNameLength = 64;

bool GoodName(const std::string& name) {
  return !name.empty() && name.size() <= kMaxNameLength &&
         std::all_of(name.begin(), name.end(),
                     [](char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; });
}

absl::StatusOr<Tool> ReadTool(const ojson& e, size_t i) {
  const std::string where = absl::StrCat("tools[", i, "]");
  if (!e.is_object()) return InvalidParam("tools", where + " must be an object");
  const ojson* type = Field(e, "type");
  if (type == nullptr || *type != "function") return InvalidParam("tools", where + ".type must be \"function\"");
  const ojson* f = Field(e, "function");
  if (f == nullptr || !f->is_object()) return InvalidParam("tools", where + ".function must be an object");
  const ojson* name = Field(*f, "name");
  if (name == nullptr || !name->is_string() || !GoodName(name->get<std::string>())) {
    return InvalidParam("tools", where + ".function.name must be 1 to 64 of a-z, A-Z, 0-9, _ and -");
  }
  if (const ojson* d = Field(*f, "description"); d != nullptr && !d->is_string()) {
    return InvalidParam("tools", where + ".function.description must be a string");
  }
  Tool t;
  t.name = name->get<std::string>();
  t.function = *f;
  if (const ojson* p = Field(*f, "parameters")) {
    if (!p->is_object()) return InvalidParam("tools", where + ".function.parameters must be a JSON Schema object");
    t.parameters = *p;
  } else {
    t.parameters = ojson{{"type", "object"}, {"properties", ojson::object()}};
  }
  return t;
}

absl::Status ReadChoice(const ojson& body, Tools* t) {
  const ojson* c = Field(body, "tool_choice");
  t->choice = t->tools.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
  if (c == nullptr) return absl::OkStatus();
  if (c->is_string()) {
    const std::string& s = c->get_ref<const std::string&>();
    if (s == "none") {
      t->choice = ToolChoice::kNone;
      return absl::OkStatus();
    }
    if (s != "auto" && s != "required") {
      return InvalidParam("tool_choice", "tool_choice must be \"none\", \"auto\", \"required\" or a function");
    }
    if (t->tools.empty()) return InvalidParam("tool_choice", "tool_choice needs tools");
    t->choice = s == "auto" ? ToolChoice::kAuto : ToolChoice::kRequired;
    return absl::OkStatus();
  }
  const ojson* f = c->is_object() ? Field(*c, "function") : nullptr;
  const ojson* name = f != nullptr && f->is_object() ? Field(*f, "name") : nullptr;
  if (name == nullptr || !name->is_string()) {
    return InvalidParam("tool_choice",
                        "tool_choice must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}");
  }
  const std::string& n = name->get_ref<const std::string&>();
  if (std::none_of(t->tools.begin(), t->tools.end(), [&](const Tool& x) { return x.name == n; })) {
    return InvalidParam("tool_choice", absl::StrCat("tool_choice names \"", n.substr(0, kMaxNameLength),
                                                    "\", which is not in tools"));
  }
  t->choice = ToolChoice::kNamed;
  t->named = n;
  return absl::OkStatus();
}

// Rewrites every "$ref" in S that points into S's own document ("#...") to
// point into the same place under PREFIX ("#/$defs/tool_0").
void RebaseRefs(ojson& s, const std::string& prefix) {
  if (s.is_object()) {
    for (auto& [key, value] : s.items()) {
      if (key == "$ref" && value.is_string() && absl::StartsWith(value.get<std::string>(), "#")) {
        value = prefix + value.get<std::string>().substr(1);
      } else {
        RebaseRefs(value, prefix);
      }
    }
  } else if (s.is_array()) {
    for (ojson& e : s) RebaseRefs(e, prefix);
  }
}

ojson Parse(absl::string_view text) {
  return ojson::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

// One call written as {"name": ..., ARGS_KEY: {...}} (arguments may also come
// as the text of an object). False unless the name is a listed function.
bool ReadCall(const ojson& v, const Tools& t, const char* args_key, ToolCall* out) {
  if (!v.is_object()) return false;
  const ojson* name = Field(v, "name");
  if (name == nullptr || !name->is_string()) return false;
  const std::string& n = name->get_ref<const std::string&>();
  if (std::none_of(t.tools.begin(), t.tools.end(), [&](const Tool& x) { return x.name == n; })) return false;
  const ojson* args = Field(v, args_key);
  if (args == nullptr) args = Field(v, "arguments");
  ojson parsed;
  if (args != nullptr && args->is_string()) {
    parsed = Parse(args->get<std::string>());
    args = &parsed;
  }
  if (args == nullptr || !args->is_object()) return false;
  out->name = n;
  out->arguments = args->dump();
  return true;
}

// A list of calls, or one call alone.
bool ReadCalls(ojson v, const Tools& t, const char* args_key, std::vector<ToolCall>* out) {
  if (v.is_object()) v = ojson::array({v});
  if (!v.is_array() || v.empty()) return false;
  for (const ojson& e : v) {
    ToolCall c;
    if (!ReadCall(e, t, args_key, &c)) return false;
    out->push_back(std::move(c));
  }
  return true;
}

// <tool_call>{...}</tool_call> blocks, the last one perhaps unclosed.
bool ReadHermes(absl::string_view text, const Tools& t, ParsedChoice* p) {
  constexpr absl::string_view kOpen = "<tool_call>", kClose = "</tool_call>";
  size_t at = text.find(kOpen);
  if (at == absl::string_view::npos) return false;
  p->content = std::string(absl::StripAsciiWhitespace(text.substr(0, at)));
  while (at != absl::string_view::npos) {
    const size_t body = at + kOpen.size();
    const size_t end = text.find(kClose, body);
    ToolCall c;
    if (!ReadCall(Parse(text.substr(body, end == absl::string_view::npos ? end : end - body)), t, "arguments", &c)) {
      return false;
    }
    p->calls.push_back(std::move(c));
    if (end == absl::string_view::npos) break;
    at = text.find(kOpen, end + kClose.size());
  }
  return true;
}

}  // namespace

absl::StatusOr<Tools> ReadTools(const ojson& body) {
  Tools t;
  if (const ojson* list = Field(body, "tools")) {
    if (!list->is_array()) return InvalidParam("tools", "tools must be a list of functions");
    if (list->size() > kMaxTools) return InvalidParam("tools", absl::StrCat("at most ", kMaxTools, " tools"));
    for (size_t i = 0; i < list->size(); ++i) {
      absl::StatusOr<Tool> tool = ReadTool((*list)[i], i);
      if (!tool.ok()) return tool.status();
      if (std::any_of(t.tools.begin(), t.tools.end(), [&](const Tool& x) { return x.name == tool->name; })) {
        return InvalidParam("tools", absl::StrCat("tools[", i, "]: the function name \"", tool->name,
                                                  "\" is given twice"));
      }
      t.tools.push_back(*std::move(tool));
    }
  }
  if (absl::Status s = ReadChoice(body, &t); !s.ok()) return s;
  if (const ojson* p = Field(body, "parallel_tool_calls")) {
    if (!p->is_boolean()) return InvalidParam("parallel_tool_calls", "parallel_tool_calls must be true or false");
    t.parallel = p->get<bool>();
  }
  return t;
}

std::string ForcedCallSchema(const Tools& t) {
  if (t.choice == ToolChoice::kNamed) {
    for (const Tool& tool : t.tools) {
      if (tool.name == t.named) return tool.parameters.dump();
    }
  }
  ojson defs = ojson::object();
  ojson calls = ojson::array();
  for (size_t i = 0; i < t.tools.size(); ++i) {
    const std::string def = absl::StrCat("tool_", i);
    ojson params = t.tools[i].parameters;
    RebaseRefs(params, "#/$defs/" + def);
    defs[def] = std::move(params);
    calls.push_back(ojson{{"type", "object"},
                          {"properties", {{"name", {{"const", t.tools[i].name}}},
                                          {"arguments", {{"$ref", "#/$defs/" + def}}}}},
                          {"required", {"name", "arguments"}},
                          {"additionalProperties", false}});
  }
  ojson schema = {{"type", "array"}, {"minItems", 1}};
  if (!t.parallel) schema["maxItems"] = 1;
  schema["items"] = calls.size() == 1 ? calls[0] : ojson{{"anyOf", std::move(calls)}};
  schema["$defs"] = std::move(defs);
  return schema.dump();
}

ToolCallFormat FormatOfTemplate(absl::string_view source) {
  if (absl::StrContains(source, "<tool_call>")) return ToolCallFormat::kHermes;
  if (absl::StrContains(source, "[TOOL_CALLS]")) return ToolCallFormat::kMistral;
  if (absl::StrContains(source, "<|python_tag|>")) return ToolCallFormat::kLlama3;
  return ToolCallFormat::kJsonList;
}

std::string ToolsSystemText(const Tools& t) {
  std::string text =
      "You may call these functions. To call one or more, answer with only a JSON list of calls, "
      "[{\"name\": <function name>, \"arguments\": <arguments object>}], and nothing else.\n\nFunctions:";
  for (const Tool& tool : t.tools) absl::StrAppend(&text, "\n", tool.function.dump());
  return text;
}

std::string JsonListText(const ojson& calls) { return calls.dump(); }

ParsedChoice ParseToolCalls(const Tools& t, ToolCallFormat format, absl::string_view text) {
  ParsedChoice p;
  const absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  bool ok = false;
  switch (t.choice) {
    case ToolChoice::kNone: break;
    case ToolChoice::kNamed: {
      // The arguments as the model wrote them, as a stream sends them.
      ok = Parse(trimmed).is_object();
      if (ok) p.calls.push_back({"", t.named, std::string(trimmed)});
      break;
    }
    case ToolChoice::kRequired: ok = ReadCalls(Parse(trimmed), t, "arguments", &p.calls); break;
    case ToolChoice::kAuto:
      switch (format) {
        case ToolCallFormat::kJsonList: ok = ReadCalls(Parse(trimmed), t, "arguments", &p.calls); break;
        case ToolCallFormat::kHermes: ok = ReadHermes(text, t, &p); break;
        case ToolCallFormat::kMistral: {
          constexpr absl::string_view kMark = "[TOOL_CALLS]";
          const size_t at = trimmed.find(kMark);
          if (at == absl::string_view::npos) break;
          p.content = std::string(absl::StripAsciiWhitespace(trimmed.substr(0, at)));
          ok = ReadCalls(Parse(trimmed.substr(at + kMark.size())), t, "arguments", &p.calls);
          break;
        }
        case ToolCallFormat::kLlama3: {
          absl::string_view call = trimmed;
          absl::ConsumePrefix(&call, "<|python_tag|>");
          ok = ReadCalls(Parse(call), t, "parameters", &p.calls);
          break;
        }
      }
      break;
  }
  if (!ok) return ParsedChoice{std::string(text), {}};
  if (!t.parallel && p.calls.size() > 1) p.calls.resize(1);
  return p;
}

}  // namespace specserve::openai
