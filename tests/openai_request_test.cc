// OpenAI request bodies to GenerateRequest: every field, and every malformed
// body a 400 naming the field (never an exception or abort).
#include "coordinator/openai_request.h"

#include <gtest/gtest.h>

#include "coordinator/openai_error.h"

namespace specserve::openai {
namespace {

std::string Param(const absl::Status& s) {
  auto p = ErrorBody(s)["error"]["param"];
  return p.is_null() ? "" : p.get<std::string>();
}

TEST(OpenAiRequestTest, CompletionFieldsBecomeTheGrpcRequest) {
  absl::StatusOr<Request> r = ParseRequest(Endpoint::kCompletions, R"({
      "model": "m", "prompt": "def f():", "max_tokens": 12, "temperature": 0.5, "top_p": 0.9, "top_k": 40,
      "stop": ["\n\n", "#"], "seed": 7, "n": 2, "stream": true, "stream_options": {"include_usage": true},
      "user": "u1", "speculative": {"drafter": "ngram", "k": 3}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model, "m");
  EXPECT_EQ(r->generate.text(), "def f():");
  EXPECT_EQ(r->generate.max_tokens(), 12);
  EXPECT_FLOAT_EQ(r->generate.temperature(), 0.5f);
  EXPECT_FLOAT_EQ(r->generate.top_p(), 0.9f);
  EXPECT_EQ(r->generate.top_k(), 40);
  ASSERT_EQ(r->generate.stop_size(), 2);
  EXPECT_EQ(r->generate.stop(0), "\n\n");
  EXPECT_EQ(r->generate.drafter(), v1::DRAFTER_NGRAM);
  EXPECT_EQ(r->generate.k(), 3);
  EXPECT_EQ(r->n, 2);
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  std::vector<v1::GenerateRequest> choices = ChoiceRequests(*r, 99);
  ASSERT_EQ(choices.size(), 2u);
  EXPECT_EQ(choices[0].seed(), 7u);
  EXPECT_EQ(choices[1].seed(), 8u);
  EXPECT_EQ(choices[1].text(), "def f():");
}

TEST(OpenAiRequestTest, OpenAiDefaults) {
  absl::StatusOr<Request> r = ParseRequest(Endpoint::kCompletions, R"({"prompt": ["x = 1"]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->generate.text(), "x = 1");
  EXPECT_FLOAT_EQ(r->generate.temperature(), 1.0f);  // OpenAI's default, not greedy
  EXPECT_FALSE(r->generate.has_max_tokens());
  EXPECT_EQ(r->generate.speculation_case(), v1::GenerateRequest::SPECULATION_NOT_SET);
  EXPECT_EQ(r->n, 1);
  EXPECT_FALSE(r->stream);
  EXPECT_FALSE(r->seed.has_value());
  EXPECT_EQ(ChoiceRequests(*r, 1234)[0].seed(), 1234u);  // the drawn seed
}

TEST(OpenAiRequestTest, PromptAsTokenIds) {
  for (const char* body : {R"({"prompt": [1, 5, 9]})", R"({"prompt": [[1, 5, 9]]})"}) {
    absl::StatusOr<Request> r = ParseRequest(Endpoint::kCompletions, body);
    ASSERT_TRUE(r.ok()) << body << ": " << r.status();
    ASSERT_TRUE(r->generate.has_token_ids());
    EXPECT_EQ(r->generate.token_ids().ids_size(), 3);
    EXPECT_EQ(r->generate.token_ids().ids(2), 9);
  }
}

TEST(OpenAiRequestTest, MaxCompletionTokensWins) {
  absl::StatusOr<Request> r =
      ParseRequest(Endpoint::kChat, R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5,
                                        "max_completion_tokens": 9})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->generate.max_tokens(), 9);
}

TEST(OpenAiRequestTest, ChatMessagesWithTextParts) {
  absl::StatusOr<Request> r = ParseRequest(Endpoint::kChat, R"({"messages": [
      {"role": "system", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null}], "stop": "END", "logprobs": false})");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->messages.size(), 3u);
  EXPECT_EQ(r->messages[0].role, "system");
  EXPECT_EQ(r->messages[1].content, "ab");
  EXPECT_FALSE(r->messages[2].content.has_value());  // null: an assistant turn that only called tools
  EXPECT_EQ(r->generate.prompt_case(), v1::GenerateRequest::PROMPT_NOT_SET);  // rendered later
  ASSERT_EQ(r->generate.stop_size(), 1);
}

TEST(OpenAiRequestTest, SpeculativeExtension) {
  absl::StatusOr<Request> a = ParseRequest(Endpoint::kCompletions, R"({"prompt": "x", "speculative": {"k": "adaptive"}})");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->generate.adaptive_k());
  absl::StatusOr<Request> b =
      ParseRequest(Endpoint::kCompletions, R"({"prompt": "x", "speculative": {"adaptive": true, "drafter": "model"}})");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(b->generate.adaptive_k());
  EXPECT_EQ(b->generate.drafter(), v1::DRAFTER_MODEL);
  absl::StatusOr<Request> c = ParseRequest(Endpoint::kCompletions, R"({"prompt": "x", "speculative": {"drafter": "none", "k": 0}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->generate.drafter(), v1::DRAFTER_NONE);
  EXPECT_EQ(c->generate.speculation_case(), v1::GenerateRequest::kK);
}

TEST(OpenAiRequestTest, BadBodiesAre400sNamingTheField) {
  struct Case {
    Endpoint endpoint;
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {Endpoint::kCompletions, "", ""},
      {Endpoint::kCompletions, "{", ""},
      {Endpoint::kCompletions, "[1, 2]", ""},
      {Endpoint::kCompletions, "\"just a string\"", ""},
      {Endpoint::kCompletions, R"({"model": "m"})", "prompt"},
      {Endpoint::kCompletions, R"({"prompt": ""})", "prompt"},
      {Endpoint::kCompletions, R"({"prompt": ["a", "b"]})", "prompt"},
      {Endpoint::kCompletions, R"({"prompt": [1, "a"]})", "prompt"},
      {Endpoint::kCompletions, R"({"prompt": [-1]})", "prompt"},
      {Endpoint::kCompletions, R"({"prompt": {"a": 1}})", "prompt"},
      {Endpoint::kCompletions, R"({"prompt": "x", "model": 3})", "model"},
      {Endpoint::kCompletions, R"({"prompt": "x", "max_tokens": -1})", "max_tokens"},
      {Endpoint::kCompletions, R"({"prompt": "x", "max_tokens": 1.5})", "max_tokens"},
      {Endpoint::kCompletions, R"({"prompt": "x", "max_tokens": "9"})", "max_tokens"},
      {Endpoint::kCompletions, R"({"prompt": "x", "max_tokens": 1e300})", "max_tokens"},
      {Endpoint::kCompletions, R"({"prompt": "x", "temperature": 3})", "temperature"},
      {Endpoint::kCompletions, R"({"prompt": "x", "temperature": "hot"})", "temperature"},
      {Endpoint::kCompletions, R"({"prompt": "x", "top_p": 0})", "top_p"},
      {Endpoint::kCompletions, R"({"prompt": "x", "top_k": -2})", "top_k"},
      {Endpoint::kCompletions, R"({"prompt": "x", "stop": 5})", "stop"},
      {Endpoint::kCompletions, R"({"prompt": "x", "stop": ["a", 1]})", "stop"},
      {Endpoint::kCompletions, R"({"prompt": "x", "n": 0})", "n"},
      {Endpoint::kCompletions, R"({"prompt": "x", "n": 1000})", "n"},
      {Endpoint::kCompletions, R"({"prompt": "x", "seed": 1.5})", "seed"},
      {Endpoint::kCompletions, R"({"prompt": "x", "stream": "yes"})", "stream"},
      {Endpoint::kCompletions, R"({"prompt": "x", "stream_options": {"include_usage": true}})", "stream_options"},
      {Endpoint::kCompletions, R"({"prompt": "x", "logprobs": 21})", "logprobs"},
      {Endpoint::kCompletions, R"({"prompt": "x", "logprobs": -1})", "logprobs"},
      {Endpoint::kCompletions, R"({"prompt": "x", "logprobs": true})", "logprobs"},
      {Endpoint::kCompletions, R"({"prompt": "x", "logprobs": 1.5})", "logprobs"},
      {Endpoint::kCompletions, R"({"prompt": "x", "top_logprobs": 2})", "top_logprobs"},
      {Endpoint::kCompletions, R"({"prompt": "x", "echo": 1})", "echo"},
      {Endpoint::kCompletions, R"({"prompt": "x", "echo": true, "logprobs": 2})", "echo"},
      {Endpoint::kCompletions, R"({"prompt": "x", "best_of": 3})", "best_of"},
      {Endpoint::kCompletions, R"({"prompt": "x", "presence_penalty": 2.5})", "presence_penalty"},
      {Endpoint::kCompletions, R"({"prompt": "x", "frequency_penalty": "a"})", "frequency_penalty"},
      {Endpoint::kCompletions, R"({"prompt": "x", "logit_bias": {"1": 101}})", "logit_bias"},
      {Endpoint::kCompletions, R"({"prompt": "x", "logit_bias": {"a": 1}})", "logit_bias"},
      {Endpoint::kCompletions, R"({"prompt": "x", "logit_bias": {"-1": 1}})", "logit_bias"},
      {Endpoint::kCompletions, R"({"prompt": "x", "logit_bias": [1]})", "logit_bias"},
      {Endpoint::kCompletions, R"({"prompt": "x", "min_p": 1.5})", "min_p"},
      {Endpoint::kCompletions, R"({"prompt": "x", "min_tokens": -1})", "min_tokens"},
      {Endpoint::kCompletions, R"({"prompt": "x", "min_tokens": 9, "max_tokens": 4})", "min_tokens"},
      {Endpoint::kCompletions, R"({"prompt": "x", "ignore_eos": 1})", "ignore_eos"},
      {Endpoint::kChat, R"({"messages": [{"role": "user", "content": "hi"}], "presence_penalty": -3})",
       "presence_penalty"},
      {Endpoint::kCompletions, R"({"prompt": "x", "user": 5})", "user"},
      {Endpoint::kCompletions, R"({"prompt": "x", "speculative": 4})", "speculative"},
      {Endpoint::kCompletions, R"({"prompt": "x", "speculative": {"drafter": "big"}})", "speculative.drafter"},
      {Endpoint::kCompletions, R"({"prompt": "x", "speculative": {"k": 99}})", "speculative.k"},
      {Endpoint::kCompletions, R"({"prompt": "x", "speculative": {"k": 2, "adaptive": true}})", "speculative.k"},
      {Endpoint::kChat, R"({"prompt": "x"})", "messages"},
      {Endpoint::kChat, R"({"messages": []})", "messages"},
      {Endpoint::kChat, R"({"messages": [5]})", "messages[0]"},
      {Endpoint::kChat, R"({"messages": [{"content": "hi"}]})", "messages[0].role"},
      {Endpoint::kChat, R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {Endpoint::kChat, R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "messages[0].content"},
      {Endpoint::kChat, R"({"messages": [{"role": "user", "content": "hi"}], "logprobs": 3})", "logprobs"},
      {Endpoint::kChat, R"({"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 2})", "top_logprobs"},
      {Endpoint::kChat, R"({"messages": [{"role": "user", "content": "hi"}], "logprobs": true, "top_logprobs": 21})",
       "top_logprobs"},
      {Endpoint::kChat, R"({"messages": [{"role": "user", "content": "hi"}], "logprobs": true, "top_logprobs": -1})",
       "top_logprobs"},
      {Endpoint::kChat, R"({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]})", "tools"},
      {Endpoint::kChat, R"({"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "xml"}})",
       "response_format"},
      {Endpoint::kChat, R"({"messages": [{"role": "user", "content": "hi"}], "response_format": "json"})",
       "response_format"},
      {Endpoint::kCompletions, R"({"prompt": "x", "response_format": {"type": "json_schema"}})", "response_format"},
      {Endpoint::kCompletions, R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"schema": 5}}})",
       "response_format"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Request> r = ParseRequest(c.endpoint, c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(HttpStatus(r.status()), 400) << c.body << ": " << r.status();
    EXPECT_EQ(Param(r.status()), c.param) << c.body << ": " << r.status();
  }
}

// response_format becomes GenerateRequest.json_schema, the schema's keys in
// the body's order (properties are generated in that order).
TEST(OpenAiRequestTest, ResponseFormatBecomesTheJsonSchema) {
  for (Endpoint e : {Endpoint::kCompletions, Endpoint::kChat}) {
    const std::string head = e == Endpoint::kCompletions ? R"("prompt": "x")"
                                                         : R"("messages": [{"role": "user", "content": "hi"}])";
    absl::StatusOr<Request> text = ParseRequest(e, "{" + head + R"(, "response_format": {"type": "text"}})");
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(text->generate.json_schema(), "");
    absl::StatusOr<Request> object = ParseRequest(e, "{" + head + R"(, "response_format": {"type": "json_object"}})");
    ASSERT_TRUE(object.ok()) << object.status();
    EXPECT_EQ(object->generate.json_schema(), R"({"type":"object"})");
    absl::StatusOr<Request> schema = ParseRequest(e, "{" + head + R"(, "response_format": {"type": "json_schema",
        "json_schema": {"name": "p", "strict": true, "schema": {"type": "object",
        "properties": {"zeta": {"type": "integer"}, "alpha": {"type": "string"}}, "required": ["zeta", "alpha"]}}}})");
    ASSERT_TRUE(schema.ok()) << schema.status();
    EXPECT_EQ(schema->generate.json_schema(),
              R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"string"}},"required":["zeta","alpha"]})");
  }
}

TEST(OpenAiRequestTest, SamplingControlsBecomeTheGrpcRequest) {
  for (Endpoint e : {Endpoint::kCompletions, Endpoint::kChat}) {
    const std::string head = e == Endpoint::kCompletions ? R"("prompt": "x")"
                                                         : R"("messages": [{"role": "user", "content": "hi"}])";
    absl::StatusOr<Request> r = ParseRequest(e, "{" + head + R"(, "logit_bias": {"5": -100, "17": 2.5},
        "presence_penalty": 0.5, "frequency_penalty": -1, "min_p": 0.05, "min_tokens": 3, "ignore_eos": true})");
    ASSERT_TRUE(r.ok()) << r.status();
    const v1::GenerateRequest& g = r->generate;
    ASSERT_EQ(g.logit_bias_size(), 2);
    EXPECT_FLOAT_EQ(g.logit_bias().at(5), -100.0f);
    EXPECT_FLOAT_EQ(g.logit_bias().at(17), 2.5f);
    EXPECT_FLOAT_EQ(g.presence_penalty(), 0.5f);
    EXPECT_FLOAT_EQ(g.frequency_penalty(), -1.0f);
    EXPECT_FLOAT_EQ(g.min_p(), 0.05f);
    EXPECT_EQ(g.min_tokens(), 3);
    EXPECT_TRUE(g.ignore_eos());
  }
}

TEST(OpenAiRequestTest, DeeplyNestedOrBrokenBodiesAreRefusedWithoutCrashing) {
  const std::string deep = R"({"prompt": )" + std::string(200000, '[') + std::string(200000, ']') + "}";
  absl::StatusOr<Request> r = ParseRequest(Endpoint::kCompletions, deep);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(HttpStatus(r.status()), 400);
  EXPECT_FALSE(ParseRequest(Endpoint::kChat, R"({"messages": [{"role": "user", "content": "\ud800)").ok());
  EXPECT_FALSE(ParseRequest(Endpoint::kChat, "{\"messages\": \"\xff\xfe\"}").ok());
}

TEST(OpenAiRequestTest, LogprobsBecomeTheGenerateRequestsFields) {
  absl::StatusOr<Request> r = ParseRequest(Endpoint::kCompletions, R"({"prompt": "x", "logprobs": 3})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->generate.logprobs());
  EXPECT_EQ(r->generate.top_logprobs(), 3);
  r = ParseRequest(Endpoint::kCompletions, R"({"prompt": "x", "logprobs": 0})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->generate.logprobs());
  EXPECT_EQ(r->generate.top_logprobs(), 0);
  r = ParseRequest(Endpoint::kCompletions, R"({"prompt": "x", "logprobs": null})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->generate.logprobs());
  r = ParseRequest(Endpoint::kChat, R"({"messages": [{"role": "user", "content": "hi"}], "logprobs": true,
                                        "top_logprobs": 20})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->generate.logprobs());
  EXPECT_EQ(r->generate.top_logprobs(), 20);
  r = ParseRequest(Endpoint::kChat, R"({"messages": [{"role": "user", "content": "hi"}], "logprobs": false,
                                        "top_logprobs": 0})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->generate.logprobs());
  // Each choice asks for them.
  r = ParseRequest(Endpoint::kChat, R"({"messages": [{"role": "user", "content": "hi"}], "logprobs": true, "n": 2})");
  ASSERT_TRUE(r.ok()) << r.status();
  for (const v1::GenerateRequest& g : ChoiceRequests(*r, 1)) EXPECT_TRUE(g.logprobs());
}

TEST(OpenAiRequestTest, NullFieldsAreAbsent) {
  absl::StatusOr<Request> r = ParseRequest(Endpoint::kCompletions,
                                           R"({"prompt": "x", "max_tokens": null, "stop": null, "seed": null,
                                               "logprobs": null, "stream_options": null, "n": null, "user": null})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->generate.has_max_tokens());
  EXPECT_FALSE(r->seed.has_value());
}

}  // namespace
}  // namespace specserve::openai
