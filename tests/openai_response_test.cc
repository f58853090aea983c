// Results as OpenAI bodies and chunks, and the SSE and error framing.
#include "coordinator/openai_response.h"

#include <gtest/gtest.h>

#include "coordinator/openai_error.h"

namespace specserve::openai {
namespace {

using json = nlohmann::json;

ChoiceResult Result(const std::string& text, int64_t prompt, int64_t tokens) {
  ChoiceResult r;
  r.text = text;
  r.finish_reason = "length";
  r.stats.set_prompt_tokens(prompt);
  r.stats.set_tokens(tokens);
  r.stats.set_rounds(4);
  r.stats.set_drafted(12);
  r.stats.set_accepted(9);
  r.stats.set_acceptance_rate(0.75);
  r.stats.set_drafter("model");
  return r;
}

ResponseHead Head(Endpoint e) { return {e, e == Endpoint::kChat ? "chatcmpl-r1" : "cmpl-r1", 1700000000, "tiny"}; }

TEST(OpenAiResponseTest, WholeCompletion) {
  json b = WholeResponse(Head(Endpoint::kCompletions), {Result("abc", 5, 3), Result("xy", 5, 2)});
  EXPECT_EQ(b["object"], "text_completion");
  EXPECT_EQ(b["id"], "cmpl-r1");
  EXPECT_EQ(b["model"], "tiny");
  ASSERT_EQ(b["choices"].size(), 2u);
  EXPECT_EQ(b["choices"][1]["index"], 1);
  EXPECT_EQ(b["choices"][1]["text"], "xy");
  EXPECT_EQ(b["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(b["choices"][0]["logprobs"].is_null());
  // The prompt counts once, every choice's tokens count.
  EXPECT_EQ(b["usage"], json({{"prompt_tokens", 5}, {"completion_tokens", 5}, {"total_tokens", 10}}));
  const json& s = b["specserve"]["choices"][0];
  EXPECT_EQ(s["rounds"], 4);
  EXPECT_EQ(s["accepted"], 9);
  EXPECT_DOUBLE_EQ(s["acceptance_rate"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(s["tokens_per_pass"].get<double>(), 0.75);  // 3 tokens in 4 passes
  EXPECT_EQ(s["drafter"], "model");
}

TEST(OpenAiResponseTest, WholeChatCompletion) {
  json b = WholeResponse(Head(Endpoint::kChat), {Result("hello", 7, 2)});
  EXPECT_EQ(b["object"], "chat.completion");
  EXPECT_EQ(b["choices"][0]["message"], json({{"role", "assistant"}, {"content", "hello"}}));
}

TEST(OpenAiResponseTest, ChatChunks) {
  const ResponseHead h = Head(Endpoint::kChat);
  json role = RoleChunk(h, 0);
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  json text = TextChunk(h, 1, "hi");
  EXPECT_EQ(text["choices"][0]["index"], 1);
  EXPECT_EQ(text["choices"][0]["delta"], json({{"content", "hi"}}));
  EXPECT_TRUE(text["choices"][0]["finish_reason"].is_null());
  json fin = FinishChunk(h, 0, Result("hi", 7, 2));
  EXPECT_EQ(fin["choices"][0]["delta"], json::object());
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(fin["specserve"]["choices"][0]["index"], 0);
  json usage = UsageChunk(h, {Result("hi", 7, 2)});
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 9);
}

TEST(OpenAiResponseTest, CompletionChunks) {
  const ResponseHead h = Head(Endpoint::kCompletions);
  json text = TextChunk(h, 0, "x");
  EXPECT_EQ(text["object"], "text_completion");
  EXPECT_EQ(text["choices"][0]["text"], "x");
}

TEST(OpenAiResponseTest, SseFramingIsOneDataLine) {
  const std::string e = SseData(json{{"text", "a\nb\r\n\nc"}});
  ASSERT_TRUE(e.starts_with("data: "));
  ASSERT_TRUE(e.ends_with("\n\n"));
  EXPECT_EQ(e.find('\n'), e.size() - 2);  // newlines in the payload are escaped
  EXPECT_EQ(json::parse(e.substr(6)), json({{"text", "a\nb\r\n\nc"}}));
  EXPECT_STREQ(kSseDone, "data: [DONE]\n\n");
  // Invalid UTF-8 cannot break the framing (or throw).
  EXPECT_NO_THROW(SseData(json{{"text", std::string("\xff\xfe")}}));
}

TEST(OpenAiErrorTest, CodesMapToTheStatusesClientsRetryOn) {
  EXPECT_EQ(HttpStatus(absl::InvalidArgumentError("x")), 400);
  EXPECT_EQ(HttpStatus(absl::UnauthenticatedError("x")), 401);
  EXPECT_EQ(HttpStatus(absl::NotFoundError("x")), 404);
  EXPECT_EQ(HttpStatus(absl::ResourceExhaustedError("x")), 429);
  EXPECT_EQ(HttpStatus(absl::UnavailableError("x")), 503);
  EXPECT_EQ(HttpStatus(absl::DeadlineExceededError("x")), 504);
  EXPECT_EQ(HttpStatus(absl::InternalError("x")), 500);
  json e = ErrorBody(InvalidParam("n", "n 0 not in [1, 16]"))["error"];
  EXPECT_EQ(e["message"], "n 0 not in [1, 16]");
  EXPECT_EQ(e["type"], "invalid_request_error");
  EXPECT_EQ(e["param"], "n");
  json r = ErrorBody(WithCode(absl::ResourceExhaustedError("full"), "rate_limit_exceeded"))["error"];
  EXPECT_EQ(r["type"], "rate_limit_error");
  EXPECT_EQ(r["code"], "rate_limit_exceeded");
  EXPECT_TRUE(r["param"].is_null());
}

// " a" then a character split over two byte tokens (é = c3 a9).
std::vector<LogprobEntry> Entries() {
  return {{{" a", -0.5f}, {{" a", -0.5f}, {" b", -1.5f}}},
          {{"\xc3", -0.25f}, {{"\xc3", -0.25f}}},
          {{"\xa9", -2.0f}, {{"x", -0.1f}, {"\xa9", -2.0f}}}};
}

TEST(OpenAiResponseTest, CompletionLogprobs) {
  ResponseHead h = Head(Endpoint::kCompletions);
  h.logprobs = true;
  ChoiceResult r = Result(" a\xc3\xa9", 5, 3);
  r.logprobs = Entries();
  json b = WholeResponse(h, {r});
  const json& lp = b["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json({" a", "bytes:\\xc3", "bytes:\\xa9"}));
  EXPECT_EQ(lp["token_logprobs"], json({-0.5, -0.25, -2.0}));
  EXPECT_EQ(lp["text_offset"], json({0, 2, 3}));
  // The alternatives and the chosen token.
  EXPECT_EQ(lp["top_logprobs"][0], json({{" a", -0.5}, {" b", -1.5}}));
  EXPECT_EQ(lp["top_logprobs"][2], json({{"x", -0.10000000149011612}, {"bytes:\\xa9", -2.0}}));
  // A streamed chunk's offsets continue from what was sent before.
  json chunk = TextChunk(h, 0, "x", ChoiceLogprobs(h, absl::MakeConstSpan(r.logprobs).subspan(2), 7));
  EXPECT_EQ(chunk["choices"][0]["logprobs"]["text_offset"], json({7}));
  // Without the request's logprobs: null.
  h.logprobs = false;
  EXPECT_TRUE(WholeResponse(h, {r})["choices"][0]["logprobs"].is_null());
}

TEST(OpenAiResponseTest, ChatLogprobs) {
  ResponseHead h = Head(Endpoint::kChat);
  h.logprobs = true;
  ChoiceResult r = Result(" a\xc3\xa9", 5, 3);
  r.logprobs = Entries();
  json b = WholeResponse(h, {r});
  const json& content = b["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 3u);
  EXPECT_EQ(content[0]["token"], " a");
  EXPECT_EQ(content[0]["logprob"], -0.5);
  EXPECT_EQ(content[0]["bytes"], json({32, 97}));
  EXPECT_EQ(content[0]["top_logprobs"],
            json({{{"token", " a"}, {"logprob", -0.5}, {"bytes", {32, 97}}},
                  {{"token", " b"}, {"logprob", -1.5}, {"bytes", {32, 98}}}}));
  EXPECT_EQ(content[1]["bytes"], json({0xc3}));
  EXPECT_EQ(content[2]["top_logprobs"].size(), 2u);
}

TEST(OpenAiResponseTest, TokenStrings) {
  EXPECT_EQ(TokenString("abc"), "abc");
  EXPECT_EQ(TokenString("\xc3\xa9"), "\xc3\xa9");
  EXPECT_EQ(TokenString("\xe2\x82"), "bytes:\\xe2\\x82");
  EXPECT_EQ(TokenString(""), "");
  EXPECT_EQ(CharCount("a\xc3\xa9\xe2\x82\xac"), 3);
}

}  // namespace
}  // namespace specserve::openai
