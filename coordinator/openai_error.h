// OpenAI error objects ({"error": {"message", "type", "param", "code"}}) and
// the HTTP status a client retries on, from the absl::Status the request path
// returns. The status code decides both (docs/style.md "Errors"):
//
//   INVALID_ARGUMENT, OUT_OF_RANGE, FAILED_PRECONDITION  400 invalid_request_error
//   UNAUTHENTICATED                                      401 authentication_error
//   NOT_FOUND                                            404 invalid_request_error
//   RESOURCE_EXHAUSTED                                   429 rate_limit_error
//   UNAVAILABLE                                          503 service_unavailable_error
//   DEADLINE_EXCEEDED                                    504 timeout_error
//   anything else                                        500 server_error
#pragma once

#include "absl/strings/string_view.h"

#include <nlohmann/json.hpp>

#include "absl/status/status.h"

namespace specserve::openai {

// INVALID_ARGUMENT naming the request field at fault (the error's "param").
absl::Status InvalidParam(absl::string_view param, absl::string_view message);
// `status` with the error's "code" (e.g. "model_not_found", "invalid_api_key").
absl::Status WithCode(absl::Status status, absl::string_view code);

int HttpStatus(const absl::Status& status);
// The error object of a non-OK status.
nlohmann::json ErrorBody(const absl::Status& status);

}  // namespace specserve::openai
