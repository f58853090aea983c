// serve-bench's client for any OpenAI-compatible server (`--openai-url`):
// the same prompts, as token ids, through POST /v1/completions streamed as
// server-sent events, so that specserve's HTTP front door and other servers
// (vLLM, llama.cpp's server, TGI) meet the same load.
//
// Tokens per delta: from the delta's text, re-encoded with the target
// model's tokenizer (a server may send several tokens per event, as a
// speculative one does); the request's total from `usage.completion_tokens`
// (stream_options.include_usage) when the server sends it. Round statistics
// come from specserve's `specserve` extension when present.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "common/tokenizer.h"
#include "tools/load_bench.h"

namespace specserve::cli {

struct OpenAiTarget {
  std::string url;      // http://host:port (a path prefix such as /v1 is not expected)
  std::string model;    // the `model` field sent; empty: the first of GET /v1/models
  std::string api_key;  // Bearer, when set
};

// INVALID_ARGUMENT for a URL that is not http://host[:port].
absl::StatusOr<SendFn> OpenAiSender(const OpenAiTarget& target, const Tokenizer& tokenizer);

}  // namespace specserve::cli
