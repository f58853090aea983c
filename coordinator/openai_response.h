// The gRPC API's results (v1::Delta, v1::Final) as OpenAI response bodies:
// "text_completion" and "chat.completion" returned whole, their chunks
// ("text_completion" / "chat.completion.chunk") as server-sent events, and
// the extension field "specserve" with each choice's round statistics
// (docs/http_api.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "coordinator/openai_logprobs.h"
#include "coordinator/openai_request.h"
#include "coordinator/openai_tools.h"
#include "specserve/v1/generation.pb.h"

namespace specserve::openai {

// What every body and chunk of one response repeats.
struct ResponseHead {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;       // "cmpl-<request id>" / "chatcmpl-<request id>"
  int64_t created = 0;  // Unix seconds
  std::string model;
  bool logprobs = false;  // the request asked for logprobs: choices carry them
};

// One finished choice.
struct ChoiceResult {
  std::string text;
  std::string finish_reason;  // "stop", "length"
  v1::GenerationStats stats;
  std::vector<LogprobEntry> logprobs;  // with ResponseHead::logprobs: one per token
  int64_t chars = 0;                   // characters of the tokens so far (text_offset)
  std::vector<ToolCall> tool_calls;    // chat with tools: the calls the text made (text is then the rest)
};

// {"prompt_tokens", "completion_tokens", "total_tokens"} over all choices
// (the prompt counted once).
nlohmann::json Usage(const std::vector<ChoiceResult>& choices);
// One choice's entry in "specserve": {"choices": [...]}.
nlohmann::json ChoiceStats(int index, const v1::GenerationStats& stats);

nlohmann::json WholeResponse(const ResponseHead& head, const std::vector<ChoiceResult>& choices);

// Stream chunks, each with one choice (or none, for usage).
nlohmann::json RoleChunk(const ResponseHead& head, int index);  // chat: {"role": "assistant"}
// `logprobs`: null, or the chunk's tokens' (ChoiceLogprobs).
nlohmann::json TextChunk(const ResponseHead& head, int index, const std::string& text,
                         const nlohmann::json& logprobs = nullptr);
// The endpoint's logprobs object for `entries`, text offsets from `first_offset`.
nlohmann::json ChoiceLogprobs(const ResponseHead& head, absl::Span<const LogprobEntry> entries,
                              int64_t first_offset);
// Chat: a choice's calls, whole, as one delta ({"tool_calls": [{"index",
// "id", "type", "function": {"name", "arguments"}}]}).
nlohmann::json ToolCallsChunk(const ResponseHead& head, int index, const std::vector<ToolCall>& calls);
// Chat: a piece of a named call's arguments as it is generated; the first
// piece (ID not empty) also carries the call's id, type and name.
nlohmann::json ToolArgumentsChunk(const ResponseHead& head, int index, const std::string& id, const std::string& name,
                                  const std::string& arguments);
// The choice's last chunk: finish_reason and its "specserve" statistics.
nlohmann::json FinishChunk(const ResponseHead& head, int index, const ChoiceResult& result);
// stream_options.include_usage: the chunk before [DONE], with no choices.
nlohmann::json UsageChunk(const ResponseHead& head, const std::vector<ChoiceResult>& choices);

// Server-sent events framing: "data: <json>\n\n"; the stream ends with kSseDone.
std::string SseData(const nlohmann::json& payload);
inline constexpr char kSseDone[] = "data: [DONE]\n\n";

}  // namespace specserve::openai
