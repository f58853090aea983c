#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>

#include "absl/base/const_init.h"
#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"

namespace specserve::log {
namespace {

std::atomic<Format> g_format{Format::kText};
ABSL_CONST_INIT absl::Mutex g_program_mu(absl::kConstInit);
std::string g_program ABSL_GUARDED_BY(g_program_mu);

thread_local std::string t_request_id;
thread_local std::string t_trace_id;

const char* LevelName(Level l) {
  switch (l) {
    case Level::kInfo: return "info";
    case Level::kWarn: return "warn";
    case Level::kError: return "error";
  }
  return "info";
}

void AppendJsonString(std::string& out, absl::string_view s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

std::string Timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const int64_t micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return absl::StrFormat("%s.%06dZ", buf, micros);
}

bool HasKey(const std::vector<Field>& fields, absl::string_view key) {
  for (const Field& f : fields) {
    if (f.key == key) return true;
  }
  return false;
}

}  // namespace

Field::Field(std::string k, int64_t v) : key(std::move(k)), value(absl::StrCat(v)), number(true) {}
Field::Field(std::string k, double v) : key(std::move(k)), number(std::isfinite(v)) {
  value = number ? absl::StrFormat("%.6g", v) : "null";
  number = true;
}

absl::StatusOr<Format> ParseFormat(absl::string_view name) {
  if (name == "text") return Format::kText;
  if (name == "json") return Format::kJson;
  return absl::InvalidArgumentError(absl::StrCat("--log-format must be text or json, not '", name, "'"));
}

void SetFormat(Format format) { g_format.store(format); }
Format format() { return g_format.load(); }

void SetProgram(absl::string_view program) {
  absl::MutexLock lock(&g_program_mu);
  g_program = std::string(program);
}

RequestScope::RequestScope(std::string request_id, std::string trace_id)
    : saved_request_id_(std::move(t_request_id)), saved_trace_id_(std::move(t_trace_id)) {
  t_request_id = std::move(request_id);
  t_trace_id = std::move(trace_id);
}

RequestScope::~RequestScope() {
  t_request_id = std::move(saved_request_id_);
  t_trace_id = std::move(saved_trace_id_);
}

void SetThreadRequest(std::string request_id, std::string trace_id) {
  t_request_id = std::move(request_id);
  t_trace_id = std::move(trace_id);
}

const std::string& CurrentRequestId() { return t_request_id; }
const std::string& CurrentTraceId() { return t_trace_id; }

std::string Render(Level level, absl::string_view msg, const std::vector<Field>& fields, bool with_scope) {
  std::vector<Field> all = fields;
  if (with_scope) {
    if (!t_request_id.empty() && !HasKey(fields, "request_id")) all.emplace_back("request_id", t_request_id);
    if (!t_trace_id.empty() && !HasKey(fields, "trace_id")) all.emplace_back("trace_id", t_trace_id);
  }
  std::string program;
  {
    absl::MutexLock lock(&g_program_mu);
    program = g_program;
  }
  std::string out;
  if (format() == Format::kText) {
    if (!program.empty()) absl::StrAppend(&out, program, ": ");
    if (level != Level::kInfo) absl::StrAppend(&out, LevelName(level), ": ");
    absl::StrAppend(&out, msg);
    for (const Field& f : all) absl::StrAppend(&out, " ", f.key, "=", f.value);
    return out;
  }
  out = "{\"ts\":";
  AppendJsonString(out, Timestamp());
  out += ",\"level\":";
  AppendJsonString(out, LevelName(level));
  if (!program.empty()) {
    out += ",\"program\":";
    AppendJsonString(out, program);
  }
  out += ",\"msg\":";
  AppendJsonString(out, msg);
  for (const Field& f : all) {
    if (f.key == "ts" || f.key == "level" || f.key == "msg" || f.key == "program") continue;
    out += ',';
    AppendJsonString(out, f.key);
    out += ':';
    if (f.number) {
      out += f.value;
    } else {
      AppendJsonString(out, f.value);
    }
  }
  out += '}';
  return out;
}

void Line(Level level, absl::string_view msg, const std::vector<Field>& fields, bool with_scope) {
  std::string line = Render(level, msg, fields, with_scope);
  line += '\n';
  for (size_t done = 0; done < line.size();) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
}

}  // namespace specserve::log
