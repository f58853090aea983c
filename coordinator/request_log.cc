#include "coordinator/request_log.h"

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "common/log.h"

namespace specserve {

bool UsableRequestId(absl::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != ':' && c != '-') return false;
  }
  return true;
}

std::string RequestId(absl::string_view given) {
  if (UsableRequestId(given)) return std::string(given);
  thread_local absl::BitGen gen;
  return absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(gen), absl::Uniform<uint64_t>(gen));
}

void LogRequest(const RequestLogLine& l, absl::string_view given_trace_id) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - l.arrived).count();
  const std::string trace_id = given_trace_id.empty() ? log::CurrentTraceId() : std::string(given_trace_id);
  const log::Level level = l.note.empty() ? log::Level::kInfo : log::Level::kWarn;
  if (log::format() == log::Format::kJson) {
    std::vector<log::Field> fields = {{"api", l.api},
                                      {"request_id", l.request_id},
                                      {"trace_id", trace_id},
                                      {"what", l.what},
                                      {"status", l.status},
                                      {"n", l.n},
                                      {"prompt_tokens", l.prompt_tokens},
                                      {"completion_tokens", l.completion_tokens},
                                      {"seconds", seconds}};
    if (!l.note.empty()) fields.emplace_back("note", l.note);
    log::Line(level, "request", fields, /*with_scope=*/false);
    return;
  }
  std::vector<log::Field> fields;
  if (!trace_id.empty()) fields.emplace_back("trace_id", trace_id);
  log::Line(log::Level::kInfo,
            absl::StrFormat("%s request_id=%s %s %s n=%d prompt_tokens=%lld completion_tokens=%lld %.3fs%s%s", l.api,
                            l.request_id, l.what, l.status, l.n, static_cast<long long>(l.prompt_tokens),
                            static_cast<long long>(l.completion_tokens), seconds, l.note.empty() ? "" : ": ", l.note),
            fields, /*with_scope=*/false);
}

namespace {
thread_local ThreadRequestIds t_request;
}  // namespace

void SetThreadRequest(ThreadRequestIds ids) {
  log::SetThreadRequest(ids.request_id, ids.trace.trace_id);
  t_request = std::move(ids);
}

const ThreadRequestIds& ThreadRequest() { return t_request; }

}  // namespace specserve
