// Chat messages to the prompt a chat model was trained on, and the tokens and
// text that end its turn. The template is, in this order: --chat-template
// FILE, the target's own (tokenizer.chat_template, sent in its ModelInfo, so
// the coordinator needs no GGUF file), or ChatML:
//
//   <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n
//
// Rendering is chat/chat_template.h's RenderChat (HF transformers' rules).
//
// The rendered text becomes token ids here, not in the request plan: the
// pieces of control and user-defined tokens in it ("<|im_start|>") become
// those tokens, which a plain Encode would spell as text. (As in llama.cpp's
// server, so do such pieces inside a message's content.)
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tokenizer.h"

#include "chat/chat_template.h"

namespace specserve {

class ChatPrompt {
 public:
  // `template_source`: a Jinja chat template, empty for ChatML.
  // `end_of_turn_ids`: the model's end-of-turn tokens besides eos.
  // `tokenizer` must outlive this object. INVALID_ARGUMENT for a template
  // that does not parse.
  static absl::StatusOr<std::unique_ptr<ChatPrompt>> Make(const std::string& template_source,
                                                          const Tokenizer& tokenizer,
                                                          std::vector<TokenId> end_of_turn_ids);

  struct Rendered {
    std::vector<TokenId> ids;            // BOS first when the tokenizer adds one
    std::vector<TokenId> stop_ids;       // end-of-turn tokens (eos is always a stop)
    std::vector<std::string> stops;      // end-of-turn text that is not a token
    int64_t bytes = 0;                   // the rendered text's length
  };
  // INVALID_ARGUMENT for no messages or what the template refuses.
  absl::StatusOr<Rendered> Render(const std::vector<ChatMessage>& messages) const;
  // The general form: template values of the messages (dicts that may carry
  // tool_calls, tool_call_id, ...) and of `tools` (None, or a list of tools).
  absl::StatusOr<Rendered> Render(const jinja::Value& messages, const jinja::Value& tools) const;

  // The template's Jinja source; empty for ChatML.
  const std::string& template_source() const { return template_source_; }

  // "ChatML (built in)" or "Jinja template (N bytes)".
  std::string description() const;

  // Text to ids, with the pieces of special tokens as those tokens.
  std::vector<TokenId> EncodeWithSpecials(const std::string& text) const;

 private:
  ChatPrompt(const Tokenizer& tokenizer) : tok_(tokenizer) {}

  const Tokenizer& tok_;
  std::string template_source_;  // empty: ChatML
  std::vector<TokenId> end_of_turn_ids_;
  // Special tokens' pieces, longest first, and which bytes can start one.
  std::vector<std::pair<std::string, TokenId>> specials_;
  bool starts_special_[256] = {};
  ChatTemplate template_;  // what renders: the given template, else ChatML
};

}  // namespace specserve
