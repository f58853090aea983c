// W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent`
// a request arrives with (HTTP header, gRPC metadata), or a new one, and the
// child each hop sends on. specserve logs the trace id of every request on
// all three processes; it records no spans itself.
//
//   traceparent: 00-<trace-id: 32 hex>-<parent-id: 16 hex>-<flags: 2 hex>
#pragma once

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace specserve {

inline constexpr char kTraceparentHeader[] = "traceparent";

struct TraceContext {
  std::string trace_id;   // 32 lowercase hex digits, not all zero
  std::string parent_id;  // 16 lowercase hex digits, not all zero: the span that sent it
  std::string flags = "01";
  std::string Header() const;  // "00-TRACE-PARENT-FLAGS"
};

// A valid traceparent (version 00, or a later version read as 00 says);
// nullopt otherwise (the caller then starts a new trace).
std::optional<TraceContext> ParseTraceparent(absl::string_view header);
// A new trace with a random id, sampled.
TraceContext NewTrace();
// The same trace with a new random span id: what this process sends on.
TraceContext ChildSpan(const TraceContext& parent);
// ChildSpan of the header when it parses, else NewTrace().
TraceContext IncomingTrace(absl::string_view header);

}  // namespace specserve
