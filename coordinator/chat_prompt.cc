#include "coordinator/chat_prompt.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace specserve {
namespace {

constexpr char kImEnd[] = "<|im_end|>";

}  // namespace

absl::StatusOr<std::unique_ptr<ChatPrompt>> ChatPrompt::Make(const std::string& template_source,
                                                             const Tokenizer& tokenizer,
                                                             std::vector<TokenId> end_of_turn_ids) {
  std::unique_ptr<ChatPrompt> p(new ChatPrompt(tokenizer));
  p->end_of_turn_ids_ = std::move(end_of_turn_ids);
  const std::string bos = tokenizer.piece(tokenizer.bos()), eos = tokenizer.piece(tokenizer.eos());
  if (template_source.empty()) {
    p->template_ = ChatMlTemplate(bos, eos);
  } else {
    p->template_source_ = template_source;
    p->template_ = ChatTemplate{template_source, bos, eos};
    if (absl::Status s = CheckChatTemplate(p->template_); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("chat template: ", s.message()));
    }
  }
  for (TokenId id = 0; id < tokenizer.vocab_size(); ++id) {
    const TokenType t = tokenizer.type(id);
    const std::string& piece = tokenizer.piece(id);
    if ((t == TokenType::kControl || t == TokenType::kUserDefined) && !piece.empty()) {
      p->specials_.emplace_back(piece, id);
      p->starts_special_[static_cast<unsigned char>(piece[0])] = true;
    }
  }
  std::stable_sort(p->specials_.begin(), p->specials_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  return p;
}

std::string ChatPrompt::description() const {
  return template_source_.empty() ? "ChatML (built in)"
                                  : absl::StrCat("Jinja template (", template_source_.size(), " bytes)");
}

std::vector<TokenId> ChatPrompt::EncodeWithSpecials(const std::string& text) const {
  std::vector<TokenId> ids;
  if (tok_.add_bos()) ids.push_back(tok_.bos());
  size_t plain_start = 0;
  auto flush_plain = [&](size_t end) {
    if (end <= plain_start) return;
    std::vector<TokenId> part = tok_.Encode(std::string_view(text).substr(plain_start, end - plain_start), false);
    ids.insert(ids.end(), part.begin(), part.end());
  };
  for (size_t i = 0; i < text.size();) {
    const TokenId* match = nullptr;
    size_t len = 0;
    if (starts_special_[static_cast<unsigned char>(text[i])]) {
      for (const auto& [piece, id] : specials_) {
        if (text.compare(i, piece.size(), piece) == 0) {
          match = &id;
          len = piece.size();
          break;
        }
      }
    }
    if (match == nullptr) {
      ++i;
      continue;
    }
    flush_plain(i);
    // A template that writes the BOS itself: the tokenizer's BOS is already first.
    if (!(*match == tok_.bos() && ids.size() == 1 && tok_.add_bos())) ids.push_back(*match);
    i += len;
    plain_start = i;
  }
  flush_plain(text.size());
  return ids;
}

absl::StatusOr<ChatPrompt::Rendered> ChatPrompt::Render(const std::vector<ChatMessage>& messages) const {
  if (messages.empty()) return absl::InvalidArgumentError("messages is empty");
  return Render(MessagesValue(messages), jinja::Value::None());
}

absl::StatusOr<ChatPrompt::Rendered> ChatPrompt::Render(const jinja::Value& messages, const jinja::Value& tools) const {
  if (messages.items().empty()) return absl::InvalidArgumentError("messages is empty");
  ChatRenderOptions options;
  options.add_generation_prompt = true;
  options.tools = tools;
  absl::StatusOr<std::string> text = RenderChat(template_, messages, options);
  if (!text.ok()) return absl::InvalidArgumentError(absl::StrCat("chat template: ", text.status().message()));
  Rendered r;
  r.bytes = static_cast<int64_t>(text->size());
  r.ids = EncodeWithSpecials(*text);
  r.stop_ids = end_of_turn_ids_;
  // ChatML ends a turn with <|im_end|>: the token where the vocabulary has
  // it, else the text.
  if (template_source_.empty() || absl::StrContains(template_source_, kImEnd)) {
    auto it = std::find_if(specials_.begin(), specials_.end(), [](const auto& s) { return s.first == kImEnd; });
    if (it != specials_.end()) {
      r.stop_ids.push_back(it->second);
    } else {
      r.stops.push_back(kImEnd);
    }
  }
  return r;
}

}  // namespace specserve
