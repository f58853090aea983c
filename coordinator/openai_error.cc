#include "coordinator/openai_error.h"

#include <optional>
#include <string>

#include "absl/strings/cord.h"

namespace specserve::openai {
namespace {

constexpr absl::string_view kParamUrl = "specserve.openai/param";
constexpr absl::string_view kCodeUrl = "specserve.openai/code";

nlohmann::json PayloadOrNull(const absl::Status& s, absl::string_view url) {
  auto p = s.GetPayload(url);
  return p ? nlohmann::json(std::string(*p)) : nlohmann::json(nullptr);
}

}  // namespace

absl::Status InvalidParam(absl::string_view param, absl::string_view message) {
  absl::Status s = absl::InvalidArgumentError(message);
  s.SetPayload(kParamUrl, absl::Cord(param));
  return s;
}

absl::Status WithCode(absl::Status status, absl::string_view code) {
  status.SetPayload(kCodeUrl, absl::Cord(code));
  return status;
}

int HttpStatus(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      return 400;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kResourceExhausted: return 429;
    case absl::StatusCode::kUnavailable: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    default: return 500;
  }
}

nlohmann::json ErrorBody(const absl::Status& s) {
  std::string type;
  switch (HttpStatus(s)) {
    case 400:
    case 404: type = "invalid_request_error"; break;
    case 401: type = "authentication_error"; break;
    case 429: type = "rate_limit_error"; break;
    case 503: type = "service_unavailable_error"; break;
    case 504: type = "timeout_error"; break;
    default: type = "server_error";
  }
  nlohmann::json code = PayloadOrNull(s, kCodeUrl);
  if (code.is_null()) code = absl::StatusCodeToString(s.code());
  return {{"error",
           {{"message", std::string(s.message())}, {"type", type}, {"param", PayloadOrNull(s, kParamUrl)},
            {"code", code}}}};
}

}  // namespace specserve::openai
