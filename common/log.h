// The servers' log lines on stderr, in one of two formats (--log-format):
//
//   text  specserve-coordinator: MESSAGE key=value ... request_id=ID trace_id=T
//   json  {"ts":"YYYY-MM-DDThh:mm:ss.ffffffZ","level":"info","program":"specserve-coordinator",
//          "msg":"MESSAGE","request_id":"ID","trace_id":"T","key":value,...}   (one object per line)
//
// A thread working for one request sets a RequestScope: every line it writes
// meanwhile carries that request's id and W3C trace id (docs/services.md "Logs").
// Lines are written whole with one write(2), so concurrent lines never interleave.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace specserve::log {

enum class Format { kText, kJson };
enum class Level { kInfo, kWarn, kError };

// "text" or "json"; INVALID_ARGUMENT otherwise.
absl::StatusOr<Format> ParseFormat(absl::string_view name);
// Process-wide, set once at start (before other threads log).
void SetFormat(Format format);
Format format();
void SetProgram(absl::string_view program);  // "specserve-coordinator"

// One key and its value; numbers are written bare in JSON.
struct Field {
  Field(std::string k, absl::string_view v) : key(std::move(k)), value(v) {}
  Field(std::string k, const char* v) : key(std::move(k)), value(v) {}
  Field(std::string k, const std::string& v) : key(std::move(k)), value(v) {}
  Field(std::string k, int64_t v);
  Field(std::string k, int v) : Field(std::move(k), static_cast<int64_t>(v)) {}
  Field(std::string k, double v);
  std::string key, value;
  bool number = false;
};

// The request this thread works for, until the scope ends (scopes nest).
class RequestScope {
 public:
  RequestScope(std::string request_id, std::string trace_id);
  ~RequestScope();
  RequestScope(const RequestScope&) = delete;
  RequestScope& operator=(const RequestScope&) = delete;

 private:
  std::string saved_request_id_, saved_trace_id_;
};
// Sets this thread's request without a scope to end it: for a server thread
// that serves one request after another (the HTTP API's), set before each.
void SetThreadRequest(std::string request_id, std::string trace_id);
// This thread's scope ("" outside one).
const std::string& CurrentRequestId();
const std::string& CurrentTraceId();

// The line as it would be written (no newline). `with_scope`: add the
// thread's request_id / trace_id where `fields` does not give them.
std::string Render(Level level, absl::string_view msg, const std::vector<Field>& fields, bool with_scope = true);
void Line(Level level, absl::string_view msg, const std::vector<Field>& fields = {}, bool with_scope = true);
inline void Info(absl::string_view msg, const std::vector<Field>& fields = {}) { Line(Level::kInfo, msg, fields); }
inline void Warn(absl::string_view msg, const std::vector<Field>& fields = {}) { Line(Level::kWarn, msg, fields); }
inline void Error(absl::string_view msg, const std::vector<Field>& fields = {}) { Line(Level::kError, msg, fields); }

}  // namespace specserve::log
