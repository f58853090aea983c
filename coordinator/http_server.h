// The coordinator's OpenAI-compatible HTTP API (--http-listen; docs/http_api.md),
// beside the gRPC API and on the same request path:
//
//   POST /v1/completions, POST /v1/chat/completions  (openai_handler.h)
//   GET  /v1/models, /v1/models/{id}   the target model
//   GET  /health      200 while the target answers, 503 otherwise
//   GET  /ready       200 when a request would be admitted now (target
//                     answering, not draining), 503 otherwise
//
// Every response carries X-Request-Id: the caller's (1-128 characters of
// [A-Za-z0-9._:-]) or a generated one. With an API key, every path but
// /health and /ready needs "Authorization: Bearer KEY" (compared in constant
// time), else 401. Errors
// are OpenAI error objects (openai_error.h), unknown routes included (404).
#pragma once

#include <memory>
#include <string>
#include <thread>

#include <httplib.h>

#include "absl/status/statusor.h"
#include "coordinator/generation_service.h"
#include "coordinator/openai_handler.h"

namespace specserve {

struct HttpOptions {
  std::string listen;         // HOST:PORT; port 0 picks a free one
  std::string api_key;        // empty: no key needed
  std::string chat_template;  // --chat-template's text; empty: the target's, else ChatML
  // Connections served at once (one thread each, keep-alive included).
  int threads = 96;
  size_t max_body_bytes = 4 << 20;
};

class HttpServer {
 public:
  // UNAVAILABLE when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpOptions& opts, GenerationService* svc);
  ~HttpServer() { Stop(); }
  int port() const { return port_; }
  // Cancels the requests still running, stops listening and waits for the
  // connections' threads. Call after the gRPC drain (new requests already
  // get 503 then).
  void Stop();

 private:
  HttpServer(const HttpOptions& opts, GenerationService* svc)
      : opts_(opts), svc_(svc), handler_(svc, opts.chat_template) {}
  void Routes();

  const HttpOptions opts_;
  GenerationService* svc_;
  OpenAiHandler handler_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace specserve
