// Logprobs in the OpenAI formats (docs/http_api.md "Logprobs"): the gRPC
// API's v1::TokenLogprob entries, with each token's text from the
// tokenizer, as /v1/completions' {tokens, token_logprobs, top_logprobs,
// text_offset} and /v1/chat/completions' {"content": [{token, logprob,
// bytes, top_logprobs}]}.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/types/span.h"
#include "common/tokenizer.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "specserve/v1/generation.pb.h"

namespace specserve::openai {

struct TokenText {
  std::string bytes;  // the token's raw bytes (Tokenizer::TokenBytes)
  float logprob = 0;
};

// One generated token and its alternatives (most likely first).
struct LogprobEntry {
  TokenText token;
  std::vector<TokenText> top;
};

std::vector<LogprobEntry> LogprobEntries(const Tokenizer& tok,
                                         const google::protobuf::RepeatedPtrField<v1::TokenLogprob>& lps);

// OpenAI's token string: the bytes when they are valid UTF-8, else
// "bytes:\xNN..." (one \xNN per byte), as OpenAI writes partial characters.
std::string TokenString(std::string_view bytes);
// Unicode characters the bytes stand for (UTF-8 lead bytes), for text_offset.
int64_t CharCount(std::string_view bytes);

// /v1/completions: {"tokens": [...], "token_logprobs": [...], "top_logprobs":
// [{token: logprob}, ...] (the N alternatives and the chosen token, so up to
// N + 1 keys), "text_offset": [...]}. text_offset counts characters of the
// completion's text, the first token at `first_offset` (0, or the characters
// already streamed).
nlohmann::json CompletionLogprobs(absl::Span<const LogprobEntry> entries, int64_t first_offset);
// /v1/chat/completions: {"content": [{"token", "logprob", "bytes": [ints],
// "top_logprobs": [{"token", "logprob", "bytes"}]}]}.
nlohmann::json ChatLogprobs(absl::Span<const LogprobEntry> entries);

}  // namespace specserve::openai
