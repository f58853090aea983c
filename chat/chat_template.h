// Chat messages to prompt text, through the model's Jinja chat template,
// rendered as HF transformers' apply_chat_template renders it: Jinja with
// trim_blocks and lstrip_blocks on, variables messages, add_generation_prompt,
// bos_token, eos_token, tools (None unless given), documents (None), and the
// globals raise_exception and strftime_now; tojson is json.dumps with
// ensure_ascii=False.
//
// A template that raises (raise_exception, e.g. roles that do not alternate)
// gives INVALID_ARGUMENT whose message starts with jinja::kRaisedPrefix; one
// that does not parse gives INVALID_ARGUMENT with the line and column.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "chat/jinja_template.h"
#include "chat/jinja_value.h"
#include "common/gguf.h"

namespace specserve {

struct ChatMessage {
  std::string role;     // "system", "user", "assistant", "tool", ...
  std::string content;
};

struct ChatTemplate {
  std::string source;     // Jinja text
  std::string bos_token;  // text of the vocabulary's BOS token ("" if none)
  std::string eos_token;  // text of its EOS token
};

// Renders MESSAGES with ADD_GENERATION_PROMPT, as HF transformers'
// apply_chat_template(messages, tokenize=False, add_generation_prompt=...) does.
absl::StatusOr<std::string> RenderChat(const ChatTemplate& t, const std::vector<ChatMessage>& messages,
                                       bool add_generation_prompt);

// The general form: messages as template values (dicts that may carry
// tool_calls, tool_call_id, ...), tools, and further template variables.
struct ChatRenderOptions {
  bool add_generation_prompt = false;
  jinja::Value tools = jinja::Value::None();  // a list of tool schemas, or None
  jinja::Vars extra;                          // e.g. {"date_string", "26 Jul 2024"}; override the defaults
  jinja::RenderLimits limits;
};
absl::StatusOr<std::string> RenderChat(const ChatTemplate& t, const jinja::Value& messages,
                                       const ChatRenderOptions& options);
// [{"role": ..., "content": ...}, ...]
jinja::Value MessagesValue(const std::vector<ChatMessage>& messages);

// INVALID_ARGUMENT (with line and column) unless T's source parses.
absl::Status CheckChatTemplate(const ChatTemplate& t);

// The GGUF key holding the template.
inline constexpr char kChatTemplateKey[] = "tokenizer.chat_template";

// The template in F's tokenizer.chat_template metadata (NOT_FOUND if absent),
// with the BOS / EOS token text from its vocabulary.
absl::StatusOr<ChatTemplate> ChatTemplateFromGguf(const GgufFile& f);

// The text of F's BOS and EOS tokens (tokenizer.ggml.tokens at
// tokenizer.ggml.bos_token_id / eos_token_id); "" for one that is absent.
absl::Status SpecialTokenText(const GgufFile& f, std::string* bos, std::string* eos);

// --chat-template FILE: the template text of PATH (NOT_FOUND if it cannot be
// read, INVALID_ARGUMENT if it does not parse), with the given token text.
absl::StatusOr<ChatTemplate> ChatTemplateFromFile(const std::string& path, const std::string& bos_token = "",
                                                  const std::string& eos_token = "");

// The fallback for a model without a template: ChatML, as HF's former
// default_chat_template (and llama.cpp's "chatml"):
//   <|im_start|>{role}\n{content}<|im_end|>\n ... [<|im_start|>assistant\n]
inline constexpr char kChatMlTemplate[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
ChatTemplate ChatMlTemplate(const std::string& bos_token = "", const std::string& eos_token = "");

// What a server uses for a model: OVERRIDE_PATH's template when given, else
// the GGUF's, else ChatML; token text from F's vocabulary either way.
absl::StatusOr<ChatTemplate> ChatTemplateForModel(const GgufFile& f, const std::string& override_path);

}  // namespace specserve
