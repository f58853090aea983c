#include "coordinator/chat_messages.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/json_field.h"
#include "coordinator/openai_error.h"

namespace specserve::openai {
namespace {

using ojson = nlohmann::ordered_json;

// An assistant message's tool_calls, each call's arguments parsed to an object.
absl::StatusOr<ojson> ReadToolCalls(const ojson& calls, const std::string& where) {
  if (!calls.is_array()) return InvalidParam(where, where + " must be a list");
  ojson out = ojson::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string at = absl::StrCat(where, "[", i, "]");
    const ojson& c = calls[i];
    const ojson* f = c.is_object() ? Field(c, "function") : nullptr;
    const ojson* name = f != nullptr && f->is_object() ? Field(*f, "name") : nullptr;
    if (name == nullptr || !name->is_string()) return InvalidParam(at, at + ".function.name must be a string");
    const ojson* args = Field(*f, "arguments");
    ojson parsed = ojson::object();
    if (args != nullptr && args->is_string()) {
      parsed = ojson::parse(args->get<std::string>(), nullptr, /*allow_exceptions=*/false);
    } else if (args != nullptr) {
      parsed = *args;
    }
    if (!parsed.is_object()) return InvalidParam(at, at + ".function.arguments must be the text of a JSON object");
    ojson call = {{"type", "function"}, {"function", {{"name", *name}, {"arguments", std::move(parsed)}}}};
    if (const ojson* id = Field(c, "id"); id != nullptr && id->is_string()) call["id"] = *id;
    out.push_back(std::move(call));
  }
  return out;
}

// The template value of one turn: role, content (None when null) and what
// the turn carries of tool calls.
absl::StatusOr<jinja::Value> TurnValue(const ChatTurn& t, const std::optional<std::string>& content,
                                       bool calls_as_values) {
  std::vector<std::pair<std::string, jinja::Value>> items = {
      {"role", jinja::Value(t.role)},
      {"content", content ? jinja::Value(*content) : jinja::Value::None()}};
  if (calls_as_values && !t.tool_calls.is_null()) {
    ASSIGN_OR_RETURN(jinja::Value calls, JsonValue(t.tool_calls));
    items.emplace_back("tool_calls", std::move(calls));
  }
  if (!t.tool_call_id.empty()) items.emplace_back("tool_call_id", jinja::Value(t.tool_call_id));
  if (!t.name.empty()) items.emplace_back("name", jinja::Value(t.name));
  return jinja::Value::Dict(std::move(items));
}

}  // namespace

absl::StatusOr<jinja::Value> JsonValue(const ojson& v) {
  switch (v.type()) {
    case ojson::value_t::null: return jinja::Value::None();
    case ojson::value_t::boolean: return jinja::Value(v.get<bool>());
    case ojson::value_t::number_integer: return jinja::Value(v.get<int64_t>());
    case ojson::value_t::number_unsigned:
      if (v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)) return jinja::Value(static_cast<int64_t>(v.get<uint64_t>()));
      return jinja::Value(v.get<double>());
    case ojson::value_t::number_float: return jinja::Value(v.get<double>());
    case ojson::value_t::string: return jinja::Value(v.get<std::string>());
    case ojson::value_t::array: {
      std::vector<jinja::Value> items;
      for (const ojson& e : v) {
        ASSIGN_OR_RETURN(jinja::Value item, JsonValue(e));
        items.push_back(std::move(item));
      }
      return jinja::Value::List(std::move(items));
    }
    case ojson::value_t::object: {
      std::vector<std::pair<std::string, jinja::Value>> items;
      for (const auto& [key, e] : v.items()) {
        ASSIGN_OR_RETURN(jinja::Value item, JsonValue(e));
        items.emplace_back(key, std::move(item));
      }
      return jinja::Value::Dict(std::move(items));
    }
    default: return absl::InvalidArgumentError("a JSON value the template cannot hold");
  }
}

absl::StatusOr<std::vector<ChatTurn>> ReadMessages(const ojson& body) {
  const ojson* m = Field(body, "messages");
  if (m == nullptr || !m->is_array() || m->empty()) {
    return InvalidParam("messages", "messages must be a non-empty list");
  }
  std::vector<ChatTurn> out;
  for (size_t i = 0; i < m->size(); ++i) {
    const ojson& e = (*m)[i];
    const std::string where = absl::StrCat("messages[", i, "]");
    if (!e.is_object()) return InvalidParam(where, where + " must be an object");
    const ojson* role = Field(e, "role");
    if (role == nullptr || !role->is_string() || role->get_ref<const std::string&>().empty()) {
      return InvalidParam(where + ".role", where + ".role must be a non-empty string");
    }
    ChatTurn turn;
    turn.role = role->get<std::string>();
    if (const ojson* content = Field(e, "content"); content == nullptr) {
      // An assistant turn that only called tools has no content.
    } else if (content->is_string()) {
      turn.content = content->get<std::string>();
    } else if (content->is_array()) {
      turn.content.emplace();
      for (const ojson& part : *content) {
        const ojson* type = part.is_object() ? Field(part, "type") : nullptr;
        const ojson* text = part.is_object() ? Field(part, "text") : nullptr;
        if (type == nullptr || *type != "text" || text == nullptr || !text->is_string()) {
          return InvalidParam(where + ".content", "only text content parts are supported");
        }
        *turn.content += text->get<std::string>();
      }
    } else {
      return InvalidParam(where + ".content", where + ".content must be a string or a list of text parts");
    }
    if (const ojson* calls = Field(e, "tool_calls")) {
      ASSIGN_OR_RETURN(turn.tool_calls, ReadToolCalls(*calls, where + ".tool_calls"));
    }
    for (auto [key, field] : {std::pair{"tool_call_id", &turn.tool_call_id}, std::pair{"name", &turn.name}}) {
      const ojson* v = Field(e, key);
      if (v == nullptr) continue;
      if (!v->is_string()) return InvalidParam(absl::StrCat(where, ".", key), absl::StrCat(where, ".", key, " must be a string"));
      *field = v->get<std::string>();
    }
    out.push_back(std::move(turn));
  }
  return out;
}

absl::StatusOr<TemplateInput> TemplateValues(const std::vector<ChatTurn>& turns, const Tools& tools,
                                             ToolCallFormat format) {
  TemplateInput in;
  const bool in_text = format == ToolCallFormat::kJsonList;
  std::vector<jinja::Value> items;
  size_t first = 0;
  if (in_text && !tools.tools.empty() && tools.choice != ToolChoice::kNone) {
    // The tools are a system message, merged into a leading one.
    std::string system = ToolsSystemText(tools);
    if (!turns.empty() && turns[0].role == "system") {
      system = absl::StrCat(turns[0].content.value_or(""), "\n\n", system);
      first = 1;
    }
    ChatTurn turn;
    turn.role = "system";
    ASSIGN_OR_RETURN(jinja::Value v, TurnValue(turn, system, false));
    items.push_back(std::move(v));
  }
  for (size_t i = first; i < turns.size(); ++i) {
    const ChatTurn& t = turns[i];
    std::optional<std::string> content = t.content;
    // Templates concatenate content: null is "" unless the template renders the turn's calls.
    if (!content && (in_text || t.tool_calls.is_null())) content.emplace();
    if (in_text && !t.tool_calls.is_null()) {
      ojson calls = ojson::array();
      for (const ojson& c : t.tool_calls) calls.push_back({{"name", c["function"]["name"]}, {"arguments", c["function"]["arguments"]}});
      content = absl::StrCat(*content, content->empty() ? "" : "\n", JsonListText(calls));
    }
    ASSIGN_OR_RETURN(jinja::Value v, TurnValue(t, content, !in_text));
    items.push_back(std::move(v));
  }
  ASSIGN_OR_RETURN(in.messages, jinja::Value::List(std::move(items)));
  if (!in_text && !tools.tools.empty() && tools.choice != ToolChoice::kNone) {
    ojson list = ojson::array();
    for (const Tool& tool : tools.tools) list.push_back({{"type", "function"}, {"function", tool.function}});
    ASSIGN_OR_RETURN(in.tools, JsonValue(list));
  }
  return in;
}

}  // namespace specserve::openai
