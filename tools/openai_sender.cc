#include "tools/openai_sender.h"

#include <memory>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace specserve::cli {
namespace {

using json = nlohmann::json;

struct HostPort {
  std::string host;
  int port = 80;
};

absl::StatusOr<HostPort> ParseUrl(const std::string& url) {
  constexpr absl::string_view kScheme = "http://";
  if (!absl::StartsWith(url, kScheme)) {
    return absl::InvalidArgumentError(absl::StrCat("--openai-url must be http://host[:port], not '", url, "'"));
  }
  std::string rest = url.substr(kScheme.size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.empty() || rest.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("--openai-url must be http://host[:port], not '", url, "'"));
  }
  HostPort hp;
  const size_t colon = rest.rfind(':');
  hp.host = rest.substr(0, colon);
  if (colon != std::string::npos && !absl::SimpleAtoi(rest.substr(colon + 1), &hp.port)) {
    return absl::InvalidArgumentError(absl::StrCat("--openai-url: bad port in '", url, "'"));
  }
  if (hp.host.empty() || hp.port < 1 || hp.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--openai-url: bad host or port in '", url, "'"));
  }
  return hp;
}

// One streamed request: feeds SSE bytes, splits events, reads each chunk.
class SseRequest {
 public:
  SseRequest(const Tokenizer& tok, RequestSample& s, LoadClock::time_point arrival)
      : tok_(tok), s_(s), arrival_(arrival) {}

  // False stops the transfer (a malformed event).
  bool Feed(const char* data, size_t len) {
    buf_.append(data, len);
    for (size_t end; (end = buf_.find("\n\n")) != std::string::npos;) {
      const std::string event = buf_.substr(0, end);
      buf_.erase(0, end + 2);
      if (!Event(event)) return false;
    }
    return true;
  }
  bool done() const { return done_; }
  int64_t streamed_tokens() const { return streamed_; }
  const std::string& error() const { return error_; }

 private:
  bool Event(const std::string& event) {
    if (!absl::StartsWith(event, "data: ")) return true;  // comments, other fields
    const std::string payload = event.substr(6);
    if (payload == "[DONE]") {
      done_ = true;
      return true;
    }
    json c = json::parse(payload, nullptr, /*allow_exceptions=*/false);
    if (c.is_discarded()) {
      error_ = "malformed event: " + payload.substr(0, 200);
      return false;
    }
    if (c.contains("error")) {
      error_ = c["error"].dump();
      return false;
    }
    if (c.contains("choices") && c["choices"].is_array()) {
      for (const json& ch : c["choices"]) {
        if (!ch.contains("text") || !ch["text"].is_string()) continue;
        const std::string& text = ch["text"].get_ref<const std::string&>();
        if (text.empty()) continue;
        const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(tok_.Encode(text, false).size()));
        streamed_ += n;
        s_.AddDelta(n, arrival_);
      }
    }
    if (c.contains("usage") && c["usage"].is_object() && c["usage"].contains("completion_tokens")) {
      s_.tokens = c["usage"]["completion_tokens"].get<int64_t>();
    }
    if (c.contains("specserve") && c["specserve"].contains("choices")) {
      for (const json& st : c["specserve"]["choices"]) {
        s_.rounds += st.value("rounds", int64_t{0});
        s_.drafted += st.value("drafted", int64_t{0});
        s_.accepted += st.value("accepted", int64_t{0});
      }
    }
    return true;
  }

  const Tokenizer& tok_;
  RequestSample& s_;
  LoadClock::time_point arrival_;
  std::string buf_, error_;
  bool done_ = false;
  int64_t streamed_ = 0;
};

// The first model GET /v1/models lists.
absl::StatusOr<std::string> FirstModel(const HostPort& hp, const std::string& api_key) {
  httplib::Client cli(hp.host, hp.port);
  cli.set_connection_timeout(10, 0);
  httplib::Headers headers;
  if (!api_key.empty()) headers.emplace("Authorization", "Bearer " + api_key);
  httplib::Result res = cli.Get("/v1/models", headers);
  if (!res) return absl::UnavailableError("GET /v1/models: " + httplib::to_string(res.error()));
  if (res->status != 200) {
    return absl::UnavailableError(absl::StrCat("GET /v1/models: HTTP ", res->status, ": ", res->body.substr(0, 200)));
  }
  json list = json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  if (list.is_discarded() || !list.contains("data") || !list["data"].is_array() || list["data"].empty() ||
      !list["data"][0].contains("id") || !list["data"][0]["id"].is_string()) {
    return absl::UnavailableError("GET /v1/models: no model listed; name one with --openai-model");
  }
  return list["data"][0]["id"].get<std::string>();
}

}  // namespace

absl::StatusOr<SendFn> OpenAiSender(const OpenAiTarget& given, const Tokenizer& tokenizer) {
  absl::StatusOr<HostPort> hp = ParseUrl(given.url);
  if (!hp.ok()) return hp.status();
  OpenAiTarget target = given;
  if (target.model.empty()) {
    absl::StatusOr<std::string> model = FirstModel(*hp, target.api_key);
    if (!model.ok()) return model.status();
    target.model = *model;
  }
  return SendFn([hp = *hp, target, &tokenizer](const std::vector<TokenId>& prompt, const LoadConfig& config,
                                               int64_t seed, LoadClock::time_point arrival) {
    RequestSample s;
    json body = {{"model", target.model},
                 {"prompt", prompt},
                 {"max_tokens", config.max_tokens},
                 {"temperature", config.temperature},
                 {"seed", seed},
                 {"stream", true},
                 {"stream_options", {{"include_usage", true}}}};
    httplib::Client cli(hp.host, hp.port);
    cli.set_read_timeout(600, 0);
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    if (!target.api_key.empty()) req.set_header("Authorization", "Bearer " + target.api_key);
    SseRequest sse(tokenizer, s, arrival);
    req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) { return sse.Feed(data, len); };
    httplib::Response res;
    httplib::Error err = httplib::Error::Success;
    const bool sent = cli.send(req, res, err);
    s.e2e_ms = std::chrono::duration<double, std::milli>(LoadClock::now() - arrival).count();
    if (!sse.error().empty()) {
      s.error = sse.error();
    } else if (!sent) {
      s.error = "HTTP: " + httplib::to_string(err);
    } else if (res.status != 200) {
      s.error = absl::StrCat("HTTP ", res.status, ": ", res.body.substr(0, 200));
    } else if (!sse.done()) {
      s.error = "the stream ended without data: [DONE]";
    } else {
      s.ok = true;
      if (s.tokens == 0) s.tokens = sse.streamed_tokens();
    }
    return s;
  });
}

}  // namespace specserve::cli
