#include "chat/chat_template.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tokenizer_vocab.h"

namespace specserve {

jinja::Value MessagesValue(const std::vector<ChatMessage>& messages) {
  std::vector<jinja::Value> items;
  items.reserve(messages.size());
  for (const ChatMessage& m : messages) {
    // Two string entries nest one deep: Dict cannot fail here.
    items.push_back(*jinja::Value::Dict({{"role", jinja::Value(m.role)}, {"content", jinja::Value(m.content)}}));
  }
  return *jinja::Value::List(std::move(items));
}

absl::StatusOr<std::string> RenderChat(const ChatTemplate& t, const jinja::Value& messages,
                                       const ChatRenderOptions& options) {
  ASSIGN_OR_RETURN(jinja::Template tmpl, jinja::Template::Parse(t.source, jinja::kHfChatSyntax));
  jinja::Vars vars = {
      {"messages", messages},
      {"tools", options.tools},
      {"documents", jinja::Value::None()},
      {"add_generation_prompt", jinja::Value(options.add_generation_prompt)},
      {"bos_token", jinja::Value(t.bos_token)},
      {"eos_token", jinja::Value(t.eos_token)},
  };
  vars.insert(vars.end(), options.extra.begin(), options.extra.end());  // later entries win
  return tmpl.Render(vars, options.limits);
}

absl::StatusOr<std::string> RenderChat(const ChatTemplate& t, const std::vector<ChatMessage>& messages,
                                       bool add_generation_prompt) {
  ChatRenderOptions o;
  o.add_generation_prompt = add_generation_prompt;
  return RenderChat(t, MessagesValue(messages), o);
}

absl::Status CheckChatTemplate(const ChatTemplate& t) {
  return jinja::Template::Parse(t.source, jinja::kHfChatSyntax).status();
}

absl::Status SpecialTokenText(const GgufFile& f, std::string* bos, std::string* eos) {
  bos->clear();
  eos->clear();
  if (!f.Has(vocab::kTokensKey)) return absl::OkStatus();
  ASSIGN_OR_RETURN(const GgufArray* tokens, f.GetArray(vocab::kTokensKey, GgufValueType::kString));
  auto text = [&](const char* key, std::string* out) -> absl::Status {
    ASSIGN_OR_RETURN(int64_t id, f.GetIntOr(key, -1));
    if (id < 0) return absl::OkStatus();
    RETURN_IF_ERROR(vocab::CheckIdInVocab(key, id, tokens->strings.size()));
    *out = tokens->strings[static_cast<size_t>(id)];
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(text(vocab::kBosKey, bos));
  return text(vocab::kEosKey, eos);
}

absl::StatusOr<ChatTemplate> ChatTemplateFromGguf(const GgufFile& f) {
  if (!f.Has(kChatTemplateKey)) {
    return absl::NotFoundError(absl::StrCat(f.path(), " has no ", kChatTemplateKey));
  }
  ChatTemplate t;
  ASSIGN_OR_RETURN(t.source, f.GetString(kChatTemplateKey));
  RETURN_IF_ERROR(SpecialTokenText(f, &t.bos_token, &t.eos_token));
  return t;
}

absl::StatusOr<ChatTemplate> ChatTemplateFromFile(const std::string& path, const std::string& bos_token,
                                                  const std::string& eos_token) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read chat template ", path));
  std::ostringstream text;
  text << in.rdbuf();
  ChatTemplate t{text.str(), bos_token, eos_token};
  if (absl::Status s = CheckChatTemplate(t); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
  }
  return t;
}

ChatTemplate ChatMlTemplate(const std::string& bos_token, const std::string& eos_token) {
  return ChatTemplate{kChatMlTemplate, bos_token, eos_token};
}

absl::StatusOr<ChatTemplate> ChatTemplateForModel(const GgufFile& f, const std::string& override_path) {
  std::string bos, eos;
  RETURN_IF_ERROR(SpecialTokenText(f, &bos, &eos));
  if (!override_path.empty()) return ChatTemplateFromFile(override_path, bos, eos);
  absl::StatusOr<ChatTemplate> t = ChatTemplateFromGguf(f);
  if (absl::IsNotFound(t.status())) return ChatMlTemplate(bos, eos);
  return t;
}

}  // namespace specserve
