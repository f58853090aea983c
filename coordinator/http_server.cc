#include "coordinator/http_server.h"

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "coordinator/openai_error.h"
#include "coordinator/request_log.h"

namespace specserve {
namespace {

using json = nlohmann::json;

// Constant time in the key's content (the length may show).
bool SameKey(const std::string& given, const std::string& key) {
  unsigned char diff = given.size() == key.size() ? 0 : 1;
  for (size_t i = 0; i < key.size(); ++i) diff |= static_cast<unsigned char>(key[i] ^ (i < given.size() ? given[i] : 0));
  return diff == 0;
}

void SetError(httplib::Response& res, const absl::Status& s) {
  res.status = openai::HttpStatus(s);
  res.set_content(openai::ErrorBody(s).dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void SetJson(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpOptions& opts, GenerationService* svc) {
  const size_t colon = opts.listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(opts.listen.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--http-listen ", opts.listen, ": want HOST:PORT"));
  }
  std::string host = opts.listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  std::unique_ptr<HttpServer> s(new HttpServer(opts, svc));
  const int threads = opts.threads;
  s->server_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s->server_.set_payload_max_length(opts.max_body_bytes);
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, with which a
  // second coordinator would share the port instead of failing to start.
  s->server_.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const void*>(&yes), sizeof(yes));
  });
  s->Routes();
  if (port == 0) {
    port = s->server_.bind_to_any_port(host);
    if (port < 0) return absl::UnavailableError(absl::StrCat("--http-listen ", opts.listen, ": cannot bind"));
  } else if (!s->server_.bind_to_port(host, port)) {
    return absl::UnavailableError(absl::StrCat("--http-listen ", opts.listen, ": cannot bind (in use?)"));
  }
  s->port_ = port;
  s->thread_ = std::thread([srv = &s->server_] { srv->listen_after_bind(); });
  return s;
}

void HttpServer::Routes() {
  // Before every route: the request id, then the API key for /v1/.
  server_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    const std::string id = RequestId(req.get_header_value(kRequestIdHeader));
    res.set_header("X-Request-Id", id);
    // This thread serves this request until the next one: its log lines and
    // its choices (ChoiceRuns) carry the id and the trace.
    TraceContext trace = IncomingTrace(req.get_header_value(kTraceparentHeader));
    res.set_header(kTraceparentHeader, trace.Header());
    SetThreadRequest({id, std::move(trace)});
    // Probes need no key; every other path does (unknown ones included).
    if (!opts_.api_key.empty() && req.path != "/health" && req.path != "/ready") {
      const std::string auth = req.get_header_value("Authorization");
      const bool bearer = absl::StartsWith(auth, "Bearer ");
      if (!bearer || !SameKey(auth.substr(7), opts_.api_key)) {
        SetError(res, openai::WithCode(absl::UnauthenticatedError(bearer ? "incorrect API key"
                                                                         : "missing API key (Authorization: Bearer KEY)"),
                                       "invalid_api_key"));
        LogRequest({"http", id, req.path, "401", 1, 0, 0, std::chrono::steady_clock::now(), "API key"});
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  auto completions = [this](openai::Endpoint e) {
    return [this, e](const httplib::Request& req, httplib::Response& res) {
      handler_.Handle(e, req, res, res.get_header_value(kRequestIdHeader));
    };
  };
  server_.Post("/v1/completions", completions(openai::Endpoint::kCompletions));
  server_.Post("/v1/chat/completions", completions(openai::Endpoint::kChat));
  // One model: the target's (the draft is named in it).
  auto model = [this](httplib::Response& res) -> std::optional<json> {
    Upstreams* up = svc_->upstreams();
    if (up == nullptr) {
      SetError(res, absl::UnavailableError("waiting for the target service"));
      return std::nullopt;
    }
    return json{{"id", up->target_info().name()}, {"object", "model"}, {"created", 0}, {"owned_by", "specserve"},
                {"context_length", up->target_info().context_length()}, {"draft_model", up->draft_model()}};
  };
  server_.Get("/v1/models", [model](const httplib::Request&, httplib::Response& res) {
    if (std::optional<json> m = model(res)) SetJson(res, 200, {{"object", "list"}, {"data", json::array({*m})}});
  });
  server_.Get(R"(/v1/models/(.+))", [model](const httplib::Request& req, httplib::Response& res) {
    std::optional<json> m = model(res);
    if (!m) return;
    if ((*m)["id"] != req.matches[1].str()) {
      return SetError(res, openai::WithCode(absl::NotFoundError(absl::StrCat("the model `", req.matches[1].str(),
                                                                             "` does not exist")),
                                            "model_not_found"));
    }
    SetJson(res, 200, *m);
  });
  server_.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    Upstreams* up = svc_->upstreams();
    const bool ok = up != nullptr && up->target_serving();
    SetJson(res, ok ? 200 : 503, {{"status", ok ? "ok" : "target unavailable"}});
  });
  server_.Get("/ready", [this](const httplib::Request&, httplib::Response& res) {
    Upstreams* up = svc_->upstreams();
    const char* why = up == nullptr              ? "waiting for the target"
                      : !up->target_serving()    ? "target unavailable"
                      : svc_->draining()         ? "draining"
                                                 : nullptr;
    SetJson(res, why ? 503 : 200, {{"status", why ? why : "ready"}});
  });
  // Unknown routes and httplib's own refusals (e.g. a body over the limit)
  // as OpenAI error objects; responses that have a body keep it.
  server_.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string what = res.status == 404 ? absl::StrCat("no route ", req.method, " ", req.path)
                                               : absl::StrCat("HTTP ", res.status, " for ", req.method, " ", req.path);
    json body = openai::ErrorBody(absl::InvalidArgumentError(what));
    body["error"]["type"] = res.status == 404 ? "not_found_error" : "invalid_request_error";
    body["error"]["code"] = res.status;
    res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
  });
  server_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    SetError(res, absl::InternalError(what));
  });
}

void HttpServer::Stop() {
  handler_.CancelAll();
  server_.stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace specserve
