#include "coordinator/openai_response.h"

namespace specserve::openai {
namespace {

using json = nlohmann::json;

bool IsChat(const ResponseHead& h) { return h.endpoint == Endpoint::kChat; }

json ToolCallsJson(const std::vector<ToolCall>& calls, bool indexed) {
  json list = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json c = {{"id", calls[i].id},
              {"type", "function"},
              {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (indexed) c["index"] = i;
    list.push_back(std::move(c));
  }
  return list;
}

json Base(const ResponseHead& h, bool chunk) {
  const char* object = IsChat(h) ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return {{"id", h.id}, {"object", object}, {"created", h.created}, {"model", h.model}};
}

// A choice's entry; `text` goes to text, message.content or delta.content.
json Choice(const ResponseHead& h, int index, bool chunk, const std::string* text, const json& finish_reason,
            const json& logprobs = nullptr) {
  json c = {{"index", index}};
  if (IsChat(h)) {
    if (chunk) {
      c["delta"] = text ? json{{"content", *text}} : json::object();
    } else {
      c["message"] = {{"role", "assistant"}, {"content", text ? *text : ""}};
    }
  } else {
    c["text"] = text ? *text : "";
  }
  c["logprobs"] = logprobs;
  c["finish_reason"] = finish_reason;
  return c;
}

}  // namespace

json Usage(const std::vector<ChoiceResult>& choices) {
  const int64_t prompt = choices.empty() ? 0 : choices[0].stats.prompt_tokens();
  int64_t completion = 0;
  for (const ChoiceResult& c : choices) completion += c.stats.tokens();
  return {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

json ChoiceStats(int index, const v1::GenerationStats& s) {
  return {{"index", index},
          {"drafter", s.drafter()},
          {"rounds", s.rounds()},
          {"drafted", s.drafted()},
          {"accepted", s.accepted()},
          {"acceptance_rate", s.acceptance_rate()},
          {"tokens_per_pass", s.rounds() ? static_cast<double>(s.tokens()) / s.rounds() : 0.0},
          {"last_k", s.last_k()},
          {"fallbacks", s.fallbacks()},
          {"ahead_hits", s.ahead_hits()},
          {"time_to_first_token_seconds", s.time_to_first_token_seconds()},
          {"total_seconds", s.total_seconds()},
          {"draft_seconds", s.draft_seconds()},
          {"verify_seconds", s.verify_seconds()},
          {"network_seconds", s.network_seconds()}};
}

json WholeResponse(const ResponseHead& head, const std::vector<ChoiceResult>& choices) {
  json body = Base(head, false);
  json list = json::array();
  json stats = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const json logprobs = head.logprobs ? ChoiceLogprobs(head, choices[i].logprobs, 0) : json(nullptr);
    json c = Choice(head, static_cast<int>(i), false, &choices[i].text, choices[i].finish_reason, logprobs);
    if (!choices[i].tool_calls.empty()) {
      if (choices[i].text.empty()) c["message"]["content"] = nullptr;
      c["message"]["tool_calls"] = ToolCallsJson(choices[i].tool_calls, false);
    }
    list.push_back(std::move(c));
    stats.push_back(ChoiceStats(static_cast<int>(i), choices[i].stats));
  }
  body["choices"] = std::move(list);
  body["usage"] = Usage(choices);
  body["specserve"] = {{"choices", std::move(stats)}};
  return body;
}

json RoleChunk(const ResponseHead& head, int index) {
  json c = Base(head, true);
  json choice = Choice(head, index, true, nullptr, nullptr);
  choice["delta"] = {{"role", "assistant"}, {"content", ""}};
  c["choices"] = json::array({std::move(choice)});
  return c;
}

json TextChunk(const ResponseHead& head, int index, const std::string& text, const json& logprobs) {
  json c = Base(head, true);
  c["choices"] = json::array({Choice(head, index, true, &text, nullptr, logprobs)});
  return c;
}

json ToolCallsChunk(const ResponseHead& head, int index, const std::vector<ToolCall>& calls) {
  json c = Base(head, true);
  json choice = Choice(head, index, true, nullptr, nullptr);
  choice["delta"] = {{"tool_calls", ToolCallsJson(calls, true)}};
  c["choices"] = json::array({std::move(choice)});
  return c;
}

json ToolArgumentsChunk(const ResponseHead& head, int index, const std::string& id, const std::string& name,
                        const std::string& arguments) {
  json call = {{"index", 0}, {"function", {{"arguments", arguments}}}};
  if (!id.empty()) {
    call["id"] = id;
    call["type"] = "function";
    call["function"]["name"] = name;
  }
  json c = Base(head, true);
  json choice = Choice(head, index, true, nullptr, nullptr);
  choice["delta"] = {{"tool_calls", json::array({std::move(call)})}};
  c["choices"] = json::array({std::move(choice)});
  return c;
}

json ChoiceLogprobs(const ResponseHead& head, absl::Span<const LogprobEntry> entries, int64_t first_offset) {
  return IsChat(head) ? ChatLogprobs(entries) : CompletionLogprobs(entries, first_offset);
}

json FinishChunk(const ResponseHead& head, int index, const ChoiceResult& result) {
  json c = Base(head, true);
  const std::string empty;
  c["choices"] = json::array({Choice(head, index, true, IsChat(head) ? nullptr : &empty, result.finish_reason)});
  c["specserve"] = {{"choices", json::array({ChoiceStats(index, result.stats)})}};
  return c;
}

json UsageChunk(const ResponseHead& head, const std::vector<ChoiceResult>& choices) {
  json c = Base(head, true);
  c["choices"] = json::array();
  c["usage"] = Usage(choices);
  return c;
}

std::string SseData(const json& payload) {
  // dump() escapes control characters, so the payload is one line.
  return "data: " + payload.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace specserve::openai
