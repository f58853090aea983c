// OpenAI function calling on the chat endpoint: the request's `tools` and
// `tool_choice` read and checked, the schema that forces a call, and a
// finished choice's text turned into `tool_calls` (docs/http_api.md "Tools").
//
// How a model is told about tools and how it writes a call depend on its
// chat template, read from the template's source:
//   kHermes   `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`
//             (Qwen2.5, Hermes; the template mentions "<tool_call>")
//   kMistral  `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]`
//   kLlama3   `{"name": ..., "parameters": {...}}`, alone, maybe after
//             `<|python_tag|>` (Llama 3.1 / 3.2)
//   kJsonList `[{"name": ..., "arguments": {...}}, ...]`, alone: a template
//             that does not render `tools` (ChatML included); the tools are
//             then described in a system message (ToolsSystemText).
// The first three templates render `tools` themselves.
//
// A call that is required (tool_choice "required") or named is generated
// under a JSON Schema, as response_format is, so it is well formed and its
// arguments validate against the function's parameters, with speculation
// on: "required" generates the kJsonList form whatever the template, a
// named function its arguments object alone (vLLM's forms). "auto" parses
// what the model wrote in its template's form; what does not parse as a
// call of a listed function is content.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace specserve::openai {

struct Tool {
  std::string name;                   // [a-zA-Z0-9_-]{1,64}
  nlohmann::ordered_json function;    // the request's "function" object, as sent (for the template)
  nlohmann::ordered_json parameters;  // the arguments' JSON Schema; no parameters: an empty object
};

enum class ToolChoice { kNone, kAuto, kRequired, kNamed };

struct Tools {
  std::vector<Tool> tools;                 // empty: the request has none
  ToolChoice choice = ToolChoice::kNone;   // "auto" by default when tools are given
  std::string named;                       // kNamed: the function's name
  bool parallel = true;                    // parallel_tool_calls: false allows one call at most

  // The output may be a call: it is parsed, and held back from a stream.
  bool active() const { return !tools.empty() && choice != ToolChoice::kNone; }
  // The output is a call, generated under ForcedCallSchema.
  bool forced() const { return choice == ToolChoice::kRequired || choice == ToolChoice::kNamed; }
};

// `tools`, `tool_choice` and `parallel_tool_calls` of a chat request body
// (read as ordered JSON, so parameters keep their key order). INVALID_ARGUMENT
// (param "tools" or "tool_choice") for a malformed entry, a duplicate or bad
// name, or a tool_choice naming no listed function or given without tools.
absl::StatusOr<Tools> ReadTools(const nlohmann::ordered_json& body);

// The JSON Schema a forced call is generated under: named, the function's
// parameters; required, [{"name": <a listed name>, "arguments": <its
// parameters>}, ...] with at least one item (one at most without parallel
// calls), each function's `$ref`s rewritten to stay inside its own schema.
std::string ForcedCallSchema(const Tools& t);

enum class ToolCallFormat { kJsonList, kHermes, kMistral, kLlama3 };
// The format a template's source writes calls in; "" (ChatML) is kJsonList.
ToolCallFormat FormatOfTemplate(absl::string_view template_source);

// The system message that describes the tools to a kJsonList template.
std::string ToolsSystemText(const Tools& t);
// An assistant turn's calls as a kJsonList model writes them.
std::string JsonListText(const nlohmann::ordered_json& calls);  // [{"name", "arguments"}]

struct ToolCall {
  std::string id;         // "call_..."; set by the response, empty from ParseToolCalls
  std::string name;
  std::string arguments;  // JSON text of an object: a named call's as written, else compact
};
struct ParsedChoice {
  std::string content;            // text that is not a call ("" when none)
  std::vector<ToolCall> calls;    // empty: the text is content only
};
// A finished choice's text under T's choice and the template's format.
ParsedChoice ParseToolCalls(const Tools& t, ToolCallFormat format, absl::string_view text);

}  // namespace specserve::openai
