// POST /v1/completions and POST /v1/chat/completions: the request parsed
// (openai_request.h), chat messages rendered (chat_prompt.h), checked by the
// request plan before anything starts (so a bad request gets its 400, even
// when streamed), its n choices run on the gRPC request path
// (choice_runs.h) and the results returned whole or as server-sent events
// (openai_response.h). A client that disconnects mid-stream is seen at the
// next write (a ": keep-alive" comment goes out after each second without
// tokens) and cancels its choices, which closes their service sessions.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <httplib.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/chat_prompt.h"
#include "coordinator/choice_runs.h"
#include "coordinator/generation_service.h"
#include "coordinator/openai_request.h"

namespace specserve {

class OpenAiHandler {
 public:
  // `chat_template`: --chat-template's text; empty: the target's, else ChatML.
  OpenAiHandler(GenerationService* svc, std::string chat_template)
      : svc_(svc), chat_template_(std::move(chat_template)) {}

  // Fills `res`; a stream's body is written by a content provider after this
  // returns. Logs one line for the request, naming `request_id`.
  void Handle(openai::Endpoint endpoint, const httplib::Request& req, httplib::Response& res,
              const std::string& request_id);
  // Shutdown: cancels every request still running.
  void CancelAll() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The chat prompt, made at first use (the target's model info is needed).
  absl::StatusOr<const ChatPrompt*> Chat(Upstreams& up) ABSL_LOCKS_EXCLUDED(mu_);
  // Renders r's messages (and tools) into its prompt; FORMAT: how the
  // template writes tool calls.
  absl::Status RenderChat(Upstreams& up, openai::Request* r, openai::ToolCallFormat* format);
  void Track(const std::shared_ptr<ChoiceRuns>& runs) ABSL_LOCKS_EXCLUDED(mu_);

  GenerationService* svc_;
  const std::string chat_template_;
  absl::Mutex mu_;
  std::unique_ptr<ChatPrompt> chat_ ABSL_GUARDED_BY(mu_);  // set once, then read without the lock
  std::vector<std::weak_ptr<ChoiceRuns>> running_ ABSL_GUARDED_BY(mu_);
};

}  // namespace specserve
