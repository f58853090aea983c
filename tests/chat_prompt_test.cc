// Chat messages to prompt ids with the bundled tokenizer: ChatML, special
// tokens, the end-of-turn stops.
#include "coordinator/chat_prompt.h"

#include <gtest/gtest.h>

#include "tests/bundled_tokenizer.h"

namespace specserve {
namespace {

TEST(ChatPromptTest, ChatMlWithoutATemplate) {
  std::unique_ptr<Tokenizer> tok = testing::BundledTokenizer();
  absl::StatusOr<std::unique_ptr<ChatPrompt>> chat = ChatPrompt::Make("", *tok, {});
  ASSERT_TRUE(chat.ok()) << chat.status();
  absl::StatusOr<ChatPrompt::Rendered> r =
      (*chat)->Render({{"system", "You write Python."}, {"user", "def add(a, b):"}});
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string text =
      "<|im_start|>system\nYou write Python.<|im_end|>\n<|im_start|>user\ndef add(a, b):<|im_end|>\n"
      "<|im_start|>assistant\n";
  // The bundled vocabulary has no <|im_*|> tokens: the text is encoded as the
  // gRPC API would encode it, and the turn ends on the text.
  EXPECT_EQ(r->ids, tok->Encode(text, /*add_bos=*/true));
  EXPECT_EQ(r->bytes, static_cast<int64_t>(text.size()));
  EXPECT_EQ(r->stops, std::vector<std::string>{"<|im_end|>"});
  EXPECT_TRUE(r->stop_ids.empty());
  EXPECT_EQ((*chat)->description(), "ChatML (built in)");
}

TEST(ChatPromptTest, SpecialTokenPiecesBecomeTheirTokens) {
  std::unique_ptr<Tokenizer> tok = testing::BundledTokenizer();
  absl::StatusOr<std::unique_ptr<ChatPrompt>> chat = ChatPrompt::Make("", *tok, {7});
  ASSERT_TRUE(chat.ok());
  const std::string eos = tok->piece(tok->eos());  // "</s>", a control token
  std::vector<TokenId> ids = (*chat)->EncodeWithSpecials("x = 1" + eos + "y");
  std::vector<TokenId> want = tok->Encode("x = 1", true);
  want.push_back(tok->eos());
  std::vector<TokenId> y = tok->Encode("y", false);
  want.insert(want.end(), y.begin(), y.end());
  EXPECT_EQ(ids, want);
  // A template that writes the BOS itself gets one BOS, not two.
  std::vector<TokenId> b = (*chat)->EncodeWithSpecials(tok->piece(tok->bos()) + "x");
  EXPECT_EQ(b, tok->Encode("x", true));
  // The model's end-of-turn ids are stops.
  absl::StatusOr<ChatPrompt::Rendered> r = (*chat)->Render({{"user", "hi"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stop_ids, std::vector<TokenId>{7});
}

TEST(ChatPromptTest, NoMessagesIsABadRequest) {
  std::unique_ptr<Tokenizer> tok = testing::BundledTokenizer();
  absl::StatusOr<std::unique_ptr<ChatPrompt>> chat = ChatPrompt::Make("", *tok, {});
  ASSERT_TRUE(chat.ok());
  EXPECT_TRUE(absl::IsInvalidArgument((*chat)->Render({}).status()));
}

}  // namespace
}  // namespace specserve

namespace specserve {
namespace {

// A model's Jinja template, its BOS written by the
// template itself and not doubled.
TEST(ChatPromptTest, RendersAJinjaTemplate) {
  std::unique_ptr<Tokenizer> tok = testing::BundledTokenizer();
  const std::string source =
      "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
      "{% if add_generation_prompt %}[assistant] {% endif %}";
  absl::StatusOr<std::unique_ptr<ChatPrompt>> chat = ChatPrompt::Make(source, *tok, {});
  ASSERT_TRUE(chat.ok()) << chat.status();
  absl::StatusOr<ChatPrompt::Rendered> r = (*chat)->Render({{"user", "def f():"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ids, tok->Encode("[user] def f():\n[assistant] ", /*add_bos=*/true));
  EXPECT_TRUE(r->stops.empty());  // no <|im_end|> in this template
  EXPECT_FALSE(ChatPrompt::Make("{% for %}", *tok, {}).ok());
}

}  // namespace
}  // namespace specserve
