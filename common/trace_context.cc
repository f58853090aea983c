#include "common/trace_context.h"

#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace specserve {
namespace {

bool LowerHex(absl::string_view s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool AllZero(absl::string_view s) { return s.find_first_not_of('0') == absl::string_view::npos; }

std::string RandomHex(int bytes) {
  thread_local std::mt19937_64 gen{std::random_device{}()};
  std::string out;
  for (int i = 0; i < bytes; i += 8) out += absl::StrFormat("%016x", gen());
  out.resize(2 * bytes);
  if (AllZero(out)) out.back() = '1';
  return out;
}

}  // namespace

std::string TraceContext::Header() const { return absl::StrCat("00-", trace_id, "-", parent_id, "-", flags); }

std::optional<TraceContext> ParseTraceparent(absl::string_view h) {
  h = absl::StripAsciiWhitespace(h);
  // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55.
  if (h.size() < 55 || h[2] != '-' || h[35] != '-' || h[52] != '-') return std::nullopt;
  const absl::string_view version = h.substr(0, 2), trace = h.substr(3, 32), parent = h.substr(36, 16),
                          flags = h.substr(53, 2);
  if (!LowerHex(version, 2) || version == "ff") return std::nullopt;
  // Version 00 is exactly 55 characters; later versions may append "-...".
  if (version == "00" ? h.size() != 55 : (h.size() > 55 && h[55] != '-')) return std::nullopt;
  if (!LowerHex(trace, 32) || AllZero(trace) || !LowerHex(parent, 16) || AllZero(parent) || !LowerHex(flags, 2)) {
    return std::nullopt;
  }
  return TraceContext{std::string(trace), std::string(parent), std::string(flags)};
}

TraceContext NewTrace() { return TraceContext{RandomHex(16), RandomHex(8), "01"}; }

TraceContext ChildSpan(const TraceContext& parent) {
  TraceContext child = parent;
  child.parent_id = RandomHex(8);
  return child;
}

TraceContext IncomingTrace(absl::string_view header) {
  std::optional<TraceContext> t = ParseTraceparent(header);
  return t ? ChildSpan(*t) : NewTrace();
}

}  // namespace specserve
