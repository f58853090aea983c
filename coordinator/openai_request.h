// An OpenAI request body (POST /v1/completions, POST /v1/chat/completions)
// checked and turned into the gRPC API's GenerateRequest (docs/http_api.md).
// Everything wrong with the JSON itself is an InvalidParam (400) naming the
// field; what depends on the model (prompt length, token ids, max_tokens
// against the context) is checked afterwards by the request plan, as for
// gRPC. No input makes it throw or abort.
//
// Where OpenAI and the gRPC API differ, OpenAI's meaning wins: temperature
// defaults to 1; without a seed each request draws one (choice i of n uses
// seed + i, so n sampled choices differ and a seeded request repeats).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/chat_messages.h"
#include "coordinator/openai_tools.h"
#include "specserve/v1/generation.pb.h"

namespace specserve::openai {

enum class Endpoint { kCompletions, kChat };

struct Request {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;                  // empty when the body names none
  // The prompt (text or token ids) is set for completions; for chat it is
  // left to the caller, who renders `messages` (coordinator/chat_prompt.h).
  v1::GenerateRequest generate;
  std::vector<ChatTurn> messages;     // chat only
  Tools tools;                        // chat only; a forced call's schema is in generate.json_schema
  int n = 1;                          // parallel choices of the same prompt
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  bool echo = false;                  // completions: each choice's text starts with the prompt
  std::optional<uint64_t> seed;
};

inline constexpr int kMaxChoices = 16;

absl::StatusOr<Request> ParseRequest(Endpoint endpoint, std::string_view body);

// One GenerateRequest per choice: choice i samples with seed + i, where the
// seed is the request's or else `drawn_seed`.
std::vector<v1::GenerateRequest> ChoiceRequests(const Request& r, uint64_t drawn_seed);

}  // namespace specserve::openai
