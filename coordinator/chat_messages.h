// A chat request's `messages`, read and checked, and the template values a
// chat template renders them from (with `tools`, coordinator/openai_tools.h).
//
// A message is {"role", "content"} with content a string, a list of
// {"type": "text", "text"} parts, or null; an assistant message may carry
// `tool_calls` ([{"id", "type": "function", "function": {"name",
// "arguments"}}], arguments the text of a JSON object) and a tool message a
// `tool_call_id` (and a `name`). Templates get each call's arguments as an
// object, as HF transformers documents and vLLM passes them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "chat/jinja_value.h"
#include "coordinator/openai_tools.h"

namespace specserve::openai {

struct ChatTurn {
  std::string role;
  std::optional<std::string> content;  // null: an assistant turn that only called tools
  nlohmann::ordered_json tool_calls;   // null, or [{"id", "type", "function": {"name", "arguments": {...}}}]
  std::string tool_call_id;            // a tool message's call
  std::string name;                    // a tool message's function, where given
};

// INVALID_ARGUMENT (param "messages[i]...") for anything malformed.
absl::StatusOr<std::vector<ChatTurn>> ReadMessages(const nlohmann::ordered_json& body);

// What a chat template renders: `messages` and `tools` (None unless given).
// For a kJsonList template the tools are a system message (merged into a
// leading system message) and past calls are the assistant's content.
struct TemplateInput {
  jinja::Value messages;
  jinja::Value tools = jinja::Value::None();
};
absl::StatusOr<TemplateInput> TemplateValues(const std::vector<ChatTurn>& turns, const Tools& tools,
                                             ToolCallFormat format);

// A JSON value as a template value (objects keep their key order).
absl::StatusOr<jinja::Value> JsonValue(const nlohmann::ordered_json& v);

}  // namespace specserve::openai
