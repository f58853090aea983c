// Function calling on the chat endpoint (coordinator/openai_tools.h,
// coordinator/chat_messages.h): tools and tool_choice read and refused,
// the forced-call schema compiled by the grammar library, calls parsed in
// each template's format, and tools and past calls rendered by real chat
// templates (tests/data/chat_templates) and by ChatML.
#include "coordinator/openai_tools.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "constrain/json_schema.h"
#include "constrain/matcher.h"
#include "coordinator/chat_messages.h"
#include "coordinator/openai_error.h"
#include "coordinator/openai_request.h"
#include "tests/test_paths.h"

namespace specserve::openai {
namespace {

using ojson = nlohmann::ordered_json;

constexpr char kWeather[] = R"({"type": "function", "function": {"name": "get_weather",
    "description": "The weather in a city", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city"]}}})";
constexpr char kTime[] = R"({"type": "function", "function": {"name": "get_time",
    "parameters": {"type": "object", "properties": {"zone": {"$ref": "#/$defs/zone"}},
    "required": ["zone"], "$defs": {"zone": {"enum": ["utc", "cet"]}}}}})";

std::string Body(const std::string& extra) {
  return R"({"messages": [{"role": "user", "content": "weather in Paris?"}], "tools": [)" + std::string(kWeather) +
         ", " + kTime + "]" + extra + "}";
}

std::string ErrorParam(const absl::Status& s) { return ErrorBody(s)["error"]["param"].get<std::string>(); }

TEST(OpenAiToolsTest, ToolChoiceDefaultsToAutoAndForcesASchema) {
  absl::StatusOr<Request> a = ParseRequest(Endpoint::kChat, Body(""));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->tools.tools.size(), 2u);
  EXPECT_EQ(a->tools.choice, ToolChoice::kAuto);
  EXPECT_TRUE(a->tools.active());
  EXPECT_TRUE(a->generate.json_schema().empty());  // auto is not constrained

  absl::StatusOr<Request> none = ParseRequest(Endpoint::kChat, Body(R"(, "tool_choice": "none")"));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->tools.active());

  absl::StatusOr<Request> named = ParseRequest(
      Endpoint::kChat, Body(R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})"));
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->tools.choice, ToolChoice::kNamed);
  // The function's parameters, keys in the request's order.
  EXPECT_EQ(named->generate.json_schema(), ojson::parse(kWeather)["function"]["parameters"].dump());

  absl::StatusOr<Request> required = ParseRequest(Endpoint::kChat, Body(R"(, "tool_choice": "required")"));
  ASSERT_TRUE(required.ok()) << required.status();
  EXPECT_TRUE(required->tools.forced());
  EXPECT_FALSE(required->generate.json_schema().empty());
}

TEST(OpenAiToolsTest, BadToolsAre400sNamingTheField) {
  const std::string user = R"({"messages": [{"role": "user", "content": "hi"}])";
  const std::pair<std::string, const char*> cases[] = {
      {user + R"(, "tools": {"a": 1}})", "tools"},
      {user + R"(, "tools": [{"type": "retrieval"}]})", "tools"},
      {user + R"(, "tools": [{"type": "function", "function": {"name": "has space"}}]})", "tools"},
      {user + R"(, "tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}]})", "tools"},
      {user + R"(, "tools": [{"type": "function", "function": {"name": "f"}},
                             {"type": "function", "function": {"name": "f"}}]})", "tools"},
      {user + R"(, "tool_choice": "required"})", "tool_choice"},
      {Body(R"(, "tool_choice": "always")"), "tool_choice"},
      {Body(R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}})"), "tool_choice"},
      {Body(R"(, "parallel_tool_calls": "yes")"), "parallel_tool_calls"},
      {Body(R"(, "tool_choice": "required", "response_format": {"type": "json_object"})"), "tool_choice"},
      {user + R"(, "messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}]})",
       "messages[0].tool_calls[0]"},
  };
  for (const auto& [body, param] : cases) {
    absl::StatusOr<Request> r = ParseRequest(Endpoint::kChat, body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(HttpStatus(r.status()), 400) << body;
    EXPECT_EQ(ErrorParam(r.status()), param) << body << ": " << r.status();
  }
}

// True when the compiled schema's grammar matches TEXT whole.
bool Matches(const std::string& schema, const std::string& text) {
  absl::StatusOr<std::shared_ptr<const constrain::Grammar>> g = constrain::CompileJsonSchemaText(schema);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return false;
  constrain::GrammarMatcher m(*g);
  return m.AcceptBytes(text) && m.IsComplete();
}

TEST(OpenAiToolsTest, TheRequiredSchemaAllowsListedCallsOnly) {
  absl::StatusOr<Tools> t = ReadTools(ojson::parse(Body(R"(, "tool_choice": "required")")));
  ASSERT_TRUE(t.ok()) << t.status();
  const std::string schema = ForcedCallSchema(*t);
  EXPECT_TRUE(Matches(schema, R"([{"name":"get_weather","arguments":{"city":"Paris"}}])"));
  // get_time's $ref still reaches its own $defs.
  EXPECT_TRUE(Matches(schema, R"([{"name":"get_weather","arguments":{"city":"Paris","unit":"c"}},)"
                              R"({"name":"get_time","arguments":{"zone":"cet"}}])"));
  EXPECT_FALSE(Matches(schema, R"([{"name":"get_time","arguments":{"zone":"pst"}}])"));
  EXPECT_FALSE(Matches(schema, R"([{"name":"launch","arguments":{}}])"));
  EXPECT_FALSE(Matches(schema, R"([])"));
  EXPECT_FALSE(Matches(schema, R"([{"name":"get_weather","arguments":{}}])"));  // city is required
  t->parallel = false;
  EXPECT_FALSE(Matches(ForcedCallSchema(*t), R"([{"name":"get_time","arguments":{"zone":"cet"}},)"
                                             R"({"name":"get_time","arguments":{"zone":"utc"}}])"));
}

TEST(OpenAiToolsTest, CallsParseInTheTemplatesFormat) {
  absl::StatusOr<Tools> t = ReadTools(ojson::parse(Body("")));
  ASSERT_TRUE(t.ok()) << t.status();
  auto calls = [&](ToolCallFormat f, const std::string& text) { return ParseToolCalls(*t, f, text); };
  const ParsedChoice hermes = calls(ToolCallFormat::kHermes,
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"cet\"}}\n</tool_call>");
  ASSERT_EQ(hermes.calls.size(), 2u);
  EXPECT_EQ(hermes.content, "Let me look.");
  EXPECT_EQ(hermes.calls[0].name, "get_weather");
  EXPECT_EQ(hermes.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(hermes.calls[1].arguments, R"({"zone":"cet"})");

  const ParsedChoice mistral =
      calls(ToolCallFormat::kMistral, R"([TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}}])");
  ASSERT_EQ(mistral.calls.size(), 1u);
  EXPECT_EQ(mistral.calls[0].arguments, R"({"city":"Oslo"})");

  const ParsedChoice llama =
      calls(ToolCallFormat::kLlama3, R"(<|python_tag|>{"name": "get_time", "parameters": {"zone": "utc"}})");
  ASSERT_EQ(llama.calls.size(), 1u);
  EXPECT_EQ(llama.calls[0].name, "get_time");
  EXPECT_EQ(llama.calls[0].arguments, R"({"zone":"utc"})");

  const ParsedChoice list =
      calls(ToolCallFormat::kJsonList, R"( [{"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}] )");
  ASSERT_EQ(list.calls.size(), 1u);
  EXPECT_EQ(list.calls[0].arguments, R"({"city":"Rome"})");  // arguments given as text

  // What is not a call of a listed function is content, whole.
  for (const std::string& text : {std::string("It is sunny."), std::string(R"([{"name": "launch", "arguments": {}}])"),
                                 std::string("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": 3}")}) {
    const ParsedChoice p = calls(text[0] == '<' ? ToolCallFormat::kHermes : ToolCallFormat::kJsonList, text);
    EXPECT_TRUE(p.calls.empty()) << text;
    EXPECT_EQ(p.content, text);
  }

  t->parallel = false;
  EXPECT_EQ(calls(ToolCallFormat::kHermes, hermes.content + "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}"
                                           "</tool_call><tool_call>{\"name\": \"get_time\", \"arguments\": {}}")
                .calls.size(),
            1u);
  t->choice = ToolChoice::kNamed;
  t->named = "get_weather";
  const ParsedChoice named = calls(ToolCallFormat::kHermes, R"({"city": "Lima"})");
  ASSERT_EQ(named.calls.size(), 1u);
  EXPECT_EQ(named.calls[0].name, "get_weather");
  EXPECT_EQ(named.content, "");
}

TEST(OpenAiToolsTest, FormatsComeFromTheTemplate) {
  auto format_of = [](const char* file) {
    std::ifstream in(specserve::testing::SourceDir() + "/tests/data/chat_templates/" + file);
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_FALSE(ss.str().empty()) << file;
    return FormatOfTemplate(ss.str());
  };
  EXPECT_EQ(format_of("qwen2.5-instruct.jinja"), ToolCallFormat::kHermes);
  EXPECT_EQ(format_of("mistral-7b-instruct-v0.3.jinja"), ToolCallFormat::kMistral);
  EXPECT_EQ(format_of("llama-3.1-instruct.jinja"), ToolCallFormat::kLlama3);
  EXPECT_EQ(format_of("gemma-2-it.jinja"), ToolCallFormat::kJsonList);
  EXPECT_EQ(FormatOfTemplate(""), ToolCallFormat::kJsonList);
}

// A conversation with a past call and its result, rendered.
absl::StatusOr<std::string> Rendered(const std::string& source, ToolCallFormat format) {
  const std::string body = R"({"messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "weather in Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}], "tools": [)" + std::string(kWeather) + "]}";
  absl::StatusOr<Request> r = ParseRequest(Endpoint::kChat, body);
  if (!r.ok()) return r.status();
  absl::StatusOr<TemplateInput> in = TemplateValues(r->messages, r->tools, format);
  if (!in.ok()) return in.status();
  ChatRenderOptions o;
  o.add_generation_prompt = true;
  o.tools = in->tools;
  return RenderChat(ChatTemplate{source, "<s>", "</s>"}, in->messages, o);
}

TEST(OpenAiToolsTest, ToolsAndPastCallsRenderThroughTheTemplate) {
  std::ifstream in(specserve::testing::SourceDir() + "/tests/data/chat_templates/qwen2.5-instruct.jinja");
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<std::string> qwen = Rendered(ss.str(), ToolCallFormat::kHermes);
  ASSERT_TRUE(qwen.ok()) << qwen.status();
  EXPECT_NE(qwen->find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\""), std::string::npos)
      << *qwen;
  EXPECT_NE(qwen->find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"),
            std::string::npos)
      << *qwen;
  EXPECT_NE(qwen->find("<tool_response>\nsunny\n</tool_response>"), std::string::npos) << *qwen;

  // ChatML renders no tools: they are a system message, the call the assistant's text.
  absl::StatusOr<std::string> chatml = Rendered(kChatMlTemplate, ToolCallFormat::kJsonList);
  ASSERT_TRUE(chatml.ok()) << chatml.status();
  EXPECT_NE(chatml->find("<|im_start|>system\nBe brief.\n\nYou may call these functions."), std::string::npos)
      << *chatml;
  EXPECT_NE(chatml->find(R"("name":"get_weather","description":"The weather in a city")"), std::string::npos)
      << *chatml;
  EXPECT_NE(chatml->find("<|im_start|>assistant\n[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}]"),
            std::string::npos)
      << *chatml;
  EXPECT_NE(chatml->find("<|im_start|>tool\nsunny<|im_end|>"), std::string::npos) << *chatml;
}

}  // namespace
}  // namespace specserve::openai
