#include "coordinator/request_log.h"

#include <cstdio>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"

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

void LogRequest(const RequestLogLine& l) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - l.arrived).count();
  std::fprintf(stderr,
               "specserve-coordinator: %s request_id=%s %s %s n=%d prompt_tokens=%lld completion_tokens=%lld "
               "%.3fs%s%s\n",
               l.api.c_str(), l.request_id.c_str(), l.what.c_str(), l.status.c_str(), l.n,
               static_cast<long long>(l.prompt_tokens), static_cast<long long>(l.completion_tokens), seconds,
               l.note.empty() ? "" : ": ", l.note.c_str());
}

}  // namespace specserve
