// The id every request carries and its one log line, for both APIs. The id is
// the caller's (HTTP X-Request-Id, gRPC x-request-id metadata) when it is
// 1-128 characters of [A-Za-z0-9._:-], else a generated one (32 hex
// digits); it comes back in the same header / initial metadata. Its W3C
// trace context (common/trace_context.h) is the caller's traceparent's child,
// or a new trace; both travel to the services as gRPC metadata.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "common/trace_context.h"

namespace specserve {

inline constexpr char kRequestIdHeader[] = "x-request-id";

bool UsableRequestId(absl::string_view id);
// `given` when usable, else a new id.
std::string RequestId(absl::string_view given);

struct RequestLogLine {
  std::string api;         // "http", "grpc"
  std::string request_id;
  std::string what;        // "/v1/completions", "Generate"
  std::string status;      // "200", "OK", "INVALID_ARGUMENT"
  int n = 1;               // choices
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  std::chrono::steady_clock::time_point arrived;
  std::string note;        // why it failed, "client gone: cancelled"
};
// text: specserve-coordinator: http request_id=ID /v1/completions 200 n=1 prompt_tokens=26 completion_tokens=24
//       0.045s[: note] trace_id=T
// json: {"msg":"request","api":"http","request_id":"ID","what":"/v1/completions","status":"200",...}
// `trace_id` empty: this thread's (common/log.h).
void LogRequest(const RequestLogLine& line, absl::string_view trace_id = "");

// The request an HTTP server thread is serving (set before each request's
// handler, kept until the next): its id and trace context. Also sets the
// thread's log scope.
struct ThreadRequestIds {
  std::string request_id;
  TraceContext trace;
};
void SetThreadRequest(ThreadRequestIds ids);
const ThreadRequestIds& ThreadRequest();

}  // namespace specserve
