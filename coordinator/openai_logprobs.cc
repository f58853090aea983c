#include "coordinator/openai_logprobs.h"

#include <cstdio>

namespace specserve::openai {
namespace {

using json = nlohmann::json;

// Length of the valid UTF-8 sequence starting at s[i], 0 when invalid.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t j = 1; j < n; ++j) {
    if ((static_cast<unsigned char>(s[i + j]) & 0xC0) != 0x80) return 0;
  }
  return n;
}

json Bytes(std::string_view b) {
  json out = json::array();
  for (char c : b) out.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::vector<LogprobEntry> LogprobEntries(const Tokenizer& tok,
                                         const google::protobuf::RepeatedPtrField<v1::TokenLogprob>& lps) {
  std::vector<LogprobEntry> out;
  out.reserve(lps.size());
  for (const v1::TokenLogprob& t : lps) {
    LogprobEntry e;
    e.token = {tok.TokenBytes(t.token_id()), t.logprob()};
    for (const v1::TopLogprob& a : t.top_logprobs()) e.top.push_back({tok.TokenBytes(a.token_id()), a.logprob()});
    out.push_back(std::move(e));
  }
  return out;
}

std::string TokenString(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    const size_t n = Utf8Length(bytes, i);
    if (n == 0) {
      std::string out = "bytes:";
      for (char c : bytes) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(c));
        out += hex;
      }
      return out;
    }
    i += n;
  }
  return std::string(bytes);
}

int64_t CharCount(std::string_view bytes) {
  int64_t n = 0;
  for (char c : bytes) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

json CompletionLogprobs(absl::Span<const LogprobEntry> entries, int64_t first_offset) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
  int64_t offset = first_offset;
  for (const LogprobEntry& e : entries) {
    const std::string token = TokenString(e.token.bytes);
    tokens.push_back(token);
    token_logprobs.push_back(e.token.logprob);
    json alts = json::object();
    for (const TokenText& a : e.top) {
      const std::string s = TokenString(a.bytes);
      if (!alts.contains(s)) alts[s] = a.logprob;  // two ids with one text: the likelier
    }
    if (!alts.contains(token)) alts[token] = e.token.logprob;
    top.push_back(std::move(alts));
    offsets.push_back(offset);
    offset += CharCount(e.token.bytes);
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top)},
          {"text_offset", std::move(offsets)}};
}

json ChatLogprobs(absl::Span<const LogprobEntry> entries) {
  json content = json::array();
  for (const LogprobEntry& e : entries) {
    json alts = json::array();
    for (const TokenText& a : e.top) {
      alts.push_back({{"token", TokenString(a.bytes)}, {"logprob", a.logprob}, {"bytes", Bytes(a.bytes)}});
    }
    content.push_back({{"token", TokenString(e.token.bytes)},
                       {"logprob", e.token.logprob},
                       {"bytes", Bytes(e.token.bytes)},
                       {"top_logprobs", std::move(alts)}});
  }
  return {{"content", std::move(content)}};
}

}  // namespace specserve::openai
