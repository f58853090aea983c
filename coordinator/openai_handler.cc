#include "coordinator/openai_handler.h"

#include <cstdio>
#include <ctime>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/openai_error.h"
#include "coordinator/openai_response.h"
#include "coordinator/request_log.h"
#include "coordinator/request_plan.h"

namespace specserve {
namespace {

using json = nlohmann::json;
using openai::ChoiceResult;
using SteadyClock = std::chrono::steady_clock;

uint64_t DrawSeed() {
  thread_local absl::BitGen gen;
  return absl::Uniform<uint64_t>(gen);
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void SetError(httplib::Response& res, const absl::Status& s) {
  res.status = openai::HttpStatus(s);
  res.set_content(Dump(openai::ErrorBody(s)), "application/json");
}

// The request's log line.
void Log(const std::string& request_id, const std::string& path, int status, int n,
         const std::vector<ChoiceResult>& results, SteadyClock::time_point t0, const std::string& note) {
  const json usage = openai::Usage(results);
  LogRequest({"http", request_id, path, std::to_string(status), n, usage["prompt_tokens"].get<int64_t>(),
              usage["completion_tokens"].get<int64_t>(), t0, note});
}

// Folds one choice's event into its result. Returns the error of a failed choice.
absl::Status Apply(const ChoiceEvent& ev, const Tokenizer& tok, std::vector<ChoiceResult>& results) {
  ChoiceResult& r = results[ev.index];
  switch (ev.kind) {
    case ChoiceEvent::Kind::kDelta:
      r.text += ev.delta.text();
      // Counted as they come, for a request that never gets its final.
      r.stats.set_tokens(r.stats.tokens() + ev.delta.token_ids_size());
      for (openai::LogprobEntry& e : openai::LogprobEntries(tok, ev.delta.logprobs())) {
        r.chars += openai::CharCount(e.token.bytes);
        r.logprobs.push_back(std::move(e));
      }
      break;
    case ChoiceEvent::Kind::kFinal:
      r.finish_reason = ev.final.finish_reason();
      r.stats = ev.final.stats();
      break;
    case ChoiceEvent::Kind::kError: return ev.error;
  }
  return absl::OkStatus();
}

// "call_" and 24 random letters and digits, as OpenAI's ids look.
std::string ToolCallId() {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local absl::BitGen gen;
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[absl::Uniform<size_t>(gen, 0, sizeof(kAlphabet) - 1)];
  return id;
}

// A finished chat choice under tools: the calls its text makes, the rest
// its content, and finish_reason "tool_calls" where it made any. A choice
// cut by max_tokens keeps its text and "length".
void ResolveToolCalls(const openai::Tools& tools, openai::ToolCallFormat format, ChoiceResult& c) {
  if (!tools.active() || c.finish_reason != "stop") return;
  openai::ParsedChoice p = openai::ParseToolCalls(tools, format, c.text);
  if (p.calls.empty()) return;
  for (openai::ToolCall& call : p.calls) call.id = ToolCallId();
  c.text = std::move(p.content);
  c.tool_calls = std::move(p.calls);
  c.finish_reason = "tool_calls";
}

// One streamed response, shared by the content provider and its releaser.
struct Stream {
  std::shared_ptr<ChoiceRuns> runs;
  const Tokenizer* tok = nullptr;
  openai::ResponseHead head;
  bool include_usage = false;
  std::string echoed;   // echo: each choice's first text
  // Active tools: a named call's text streams as its arguments; any other
  // choice's text is held back until it is parsed.
  openai::Tools tools;
  openai::ToolCallFormat format = openai::ToolCallFormat::kJsonList;
  std::vector<std::string> call_ids;  // per choice: the streamed named call's id, once sent
  int n = 1;
  std::vector<ChoiceResult> results;
  std::string request_id, path;
  SteadyClock::time_point t0;
  std::string note;
  // The whole stream was written. (httplib 0.11 passes `success` false to
  // the releaser even then, so that flag cannot say the client left.)
  bool finished = false;

  // A held-back choice, once final: its content (with all its logprobs),
  // then its calls.
  template <typename Write>
  bool WriteHeld(int index, Write& write) {
    ChoiceResult& c = results[index];
    ResolveToolCalls(tools, format, c);
    if (!c.text.empty() || (head.logprobs && !c.logprobs.empty())) {
      const nlohmann::json lp = head.logprobs ? openai::ChoiceLogprobs(head, c.logprobs, 0) : nlohmann::json(nullptr);
      if (!write(openai::SseData(openai::TextChunk(head, index, c.text, lp)))) return false;
    }
    return c.tool_calls.empty() || write(openai::SseData(openai::ToolCallsChunk(head, index, c.tool_calls)));
  }

  // Writes the whole stream; false when the client is gone.
  bool Run(httplib::DataSink& sink) {
    auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
    if (head.endpoint == openai::Endpoint::kChat) {
      for (int i = 0; i < n; ++i) {
        if (!write(openai::SseData(openai::RoleChunk(head, i)))) return false;
      }
    }
    for (int i = 0; !echoed.empty() && i < n; ++i) {
      if (!write(openai::SseData(openai::TextChunk(head, i, echoed)))) return false;
    }
    absl::Status failed;
    ChoiceEvent ev;
    auto quiet_since = SteadyClock::now();
    for (;;) {
      const ChoiceRuns::Next next = runs->Wait(&ev, std::chrono::milliseconds(250));
      if (next == ChoiceRuns::Next::kEnd) break;
      if (next == ChoiceRuns::Next::kTimeout) {
        // An idle client that left is only seen by writing to it.
        if (SteadyClock::now() - quiet_since >= std::chrono::seconds(1)) {
          if (!write(": keep-alive\n\n")) return false;
          quiet_since = SteadyClock::now();
        }
        continue;
      }
      quiet_since = SteadyClock::now();
      // This delta's logprobs start after what the choice already has.
      const size_t lp_before = results[ev.index].logprobs.size();
      const int64_t chars_before = results[ev.index].chars;
      if (absl::Status s = Apply(ev, *tok, results); !s.ok()) {
        // The first failure ends the response; the other choices are cancelled.
        if (failed.ok()) {
          failed = s;
          note = std::string(s.ToString());
          runs->Cancel();
          if (!write(openai::SseData(openai::ErrorBody(s)))) return false;
        }
        continue;
      }
      if (!failed.ok()) continue;
      bool ok = true;
      if (ev.kind == ChoiceEvent::Kind::kDelta && tools.active()) {
        if (tools.choice == openai::ToolChoice::kNamed && !ev.delta.text().empty()) {
          std::string& id = call_ids[ev.index];
          const bool first = id.empty();
          if (first) id = ToolCallId();
          ok = write(openai::SseData(
              openai::ToolArgumentsChunk(head, ev.index, first ? id : "", tools.named, ev.delta.text())));
        }
      } else if (ev.kind == ChoiceEvent::Kind::kDelta && (!ev.delta.text().empty() || ev.delta.logprobs_size() > 0)) {
        const std::vector<openai::LogprobEntry>& lps = results[ev.index].logprobs;
        const nlohmann::json chunk_logprobs =
            head.logprobs ? openai::ChoiceLogprobs(head, absl::MakeConstSpan(lps).subspan(lp_before), chars_before)
                          : nlohmann::json(nullptr);
        ok = write(openai::SseData(openai::TextChunk(head, ev.index, ev.delta.text(), chunk_logprobs)));
      } else if (ev.kind == ChoiceEvent::Kind::kFinal) {
        if (tools.choice == openai::ToolChoice::kNamed) {
          // Streamed already: only the finish_reason, and the id sent.
          ResolveToolCalls(tools, format, results[ev.index]);
          for (openai::ToolCall& call : results[ev.index].tool_calls) call.id = call_ids[ev.index];
        } else if (tools.active()) {
          ok = WriteHeld(ev.index, write);
        }
        ok = ok && write(openai::SseData(openai::FinishChunk(head, ev.index, results[ev.index])));
      }
      if (!ok) return false;
    }
    if (failed.ok() && include_usage && !write(openai::SseData(openai::UsageChunk(head, results)))) return false;
    if (!write(openai::kSseDone)) return false;
    sink.done();
    finished = true;
    return true;
  }
};

}  // namespace

absl::StatusOr<const ChatPrompt*> OpenAiHandler::Chat(Upstreams& up) {
  absl::MutexLock lock(&mu_);
  if (chat_) return chat_.get();
  const v1::ModelInfo& info = up.target_info();
  const std::vector<TokenId> end_of_turn(info.end_of_turn_ids().begin(), info.end_of_turn_ids().end());
  std::string source = chat_template_.empty() ? info.chat_template() : chat_template_;
  std::string origin = chat_template_.empty() ? "the target's chat template" : "--chat-template";
  absl::StatusOr<std::unique_ptr<ChatPrompt>> made = ChatPrompt::Make(source, up.tokenizer(), end_of_turn);
  if (!made.ok()) {
    // The operator's own template must work; a model's broken one is replaced.
    if (!chat_template_.empty()) return absl::InternalError(absl::StrCat("--chat-template: ", made.status().message()));
    log::Warn(absl::StrCat("the target's chat template is unusable (", made.status().ToString(), "): using ChatML"));
    source.clear();
    ASSIGN_OR_RETURN(made, ChatPrompt::Make(source, up.tokenizer(), end_of_turn));
  }
  chat_ = std::move(*made);
  if (source.empty()) origin = "no usable chat template";
  log::Info(absl::StrCat("chat requests render with ", chat_->description(), " (", origin, ")"));
  return chat_.get();
}

absl::Status OpenAiHandler::RenderChat(Upstreams& up, openai::Request* r, openai::ToolCallFormat* format) {
  ASSIGN_OR_RETURN(const ChatPrompt* chat, Chat(up));
  *format = openai::FormatOfTemplate(chat->template_source());
  absl::StatusOr<openai::TemplateInput> in = openai::TemplateValues(r->messages, r->tools, *format);
  if (!in.ok()) return openai::InvalidParam("messages", in.status().message());
  absl::StatusOr<ChatPrompt::Rendered> p = chat->Render(in->messages, in->tools);
  if (!p.ok()) return openai::InvalidParam("messages", p.status().message());
  if (p->bytes > svc_->options().max_prompt_bytes) {
    return openai::InvalidParam("messages", absl::StrCat("the rendered chat of ", p->bytes,
                                                         " bytes is over the limit of ",
                                                         svc_->options().max_prompt_bytes));
  }
  v1::GenerateRequest& g = r->generate;
  g.mutable_token_ids()->mutable_ids()->Add(p->ids.begin(), p->ids.end());
  g.mutable_stop_token_ids()->Add(p->stop_ids.begin(), p->stop_ids.end());
  for (const std::string& s : p->stops) g.add_stop(s);
  return absl::OkStatus();
}

void OpenAiHandler::Track(const std::shared_ptr<ChoiceRuns>& runs) {
  absl::MutexLock lock(&mu_);
  std::erase_if(running_, [](const std::weak_ptr<ChoiceRuns>& w) { return w.expired(); });
  running_.push_back(runs);
}

void OpenAiHandler::CancelAll() {
  absl::MutexLock lock(&mu_);
  for (const std::weak_ptr<ChoiceRuns>& w : running_) {
    if (std::shared_ptr<ChoiceRuns> r = w.lock()) r->Cancel();
  }
}

void OpenAiHandler::Handle(openai::Endpoint endpoint, const httplib::Request& req, httplib::Response& res,
                           const std::string& request_id) {
  const auto t0 = SteadyClock::now();
  int n = 1;
  auto fail = [&](const absl::Status& s) {
    SetError(res, s);
    Log(request_id, req.path, res.status, n, {}, t0, s.ToString());
  };
  absl::StatusOr<openai::Request> r = openai::ParseRequest(endpoint, req.body);
  if (!r.ok()) return fail(r.status());
  n = r->n;
  Upstreams* up = svc_->upstreams();
  if (up == nullptr) return fail(absl::UnavailableError("waiting for the target service"));
  const std::string& model = up->target_info().name();
  if (!r->model.empty() && r->model != model) {
    return fail(openai::WithCode(
        absl::NotFoundError(absl::StrCat("the model `", r->model, "` does not exist: this server has `", model, "`")),
        "model_not_found"));
  }
  openai::ToolCallFormat format = openai::ToolCallFormat::kJsonList;
  if (endpoint == openai::Endpoint::kChat) {
    if (absl::Status s = RenderChat(*up, &*r, &format); !s.ok()) return fail(s);
  }
  std::vector<v1::GenerateRequest> requests = openai::ChoiceRequests(*r, DrawSeed());
  // The plan's checks (prompt, max_tokens against the context, stops) before
  // a stream has started; the worker plans again.
  if (absl::StatusOr<Plan> plan =
          PlanRequest(requests[0], svc_->options(), up->tokenizer(), up->config(), up->draft_configured(),
                      &up->grammar());
      !plan.ok()) {
    // A schema that does not compile, or compiles past the grammar's
    // limits, is the request's fault (400, not 429): response_format's, or
    // for a forced call the tools' parameters.
    if (absl::StartsWith(plan.status().message(), "json_schema: ")) {
      return fail(r->tools.forced()
                      ? openai::InvalidParam("tools", absl::StrCat("the tools' parameters: ", plan.status().message()))
                      : openai::InvalidParam("response_format", plan.status().message()));
    }
    return fail(plan.status());
  }
  absl::StatusOr<std::shared_ptr<ChoiceRuns>> runs = ChoiceRuns::Start(svc_, std::move(requests));
  if (!runs.ok()) return fail(runs.status());
  Track(*runs);

  openai::ResponseHead head;
  head.endpoint = endpoint;
  head.id = (endpoint == openai::Endpoint::kChat ? "chatcmpl-" : "cmpl-") + request_id;
  head.created = static_cast<int64_t>(std::time(nullptr));
  head.model = model;
  head.logprobs = r->generate.logprobs();
  // echo: the prompt as text (token ids decoded), before each choice's text.
  std::string echoed;
  if (r->echo) {
    echoed = r->generate.has_token_ids()
                 ? up->tokenizer().Decode({r->generate.token_ids().ids().begin(), r->generate.token_ids().ids().end()})
                 : r->generate.text();
  }

  if (r->stream) {
    auto st = std::make_shared<Stream>();
    st->runs = std::move(*runs);
    st->tok = &up->tokenizer();
    st->head = std::move(head);
    st->include_usage = r->include_usage;
    st->echoed = std::move(echoed);
    st->tools = r->tools;
    st->call_ids.resize(n);
    st->format = format;
    st->n = n;
    st->results.resize(n);
    st->request_id = request_id;
    st->path = req.path;
    st->t0 = t0;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream", [st](size_t, httplib::DataSink& sink) { return st->Run(sink); },
        [st](bool) {
          if (!st->finished) {
            st->runs->Cancel();
            st->note = "client gone: cancelled";
          }
          Log(st->request_id, st->path, 200, st->n, st->results, st->t0, st->note);
        });
    return;
  }
  std::vector<ChoiceResult> results(n);
  absl::Status failed;
  ChoiceEvent ev;
  for (;;) {
    const ChoiceRuns::Next next = (*runs)->Wait(&ev, std::chrono::seconds(1));
    if (next == ChoiceRuns::Next::kEnd) break;
    if (next == ChoiceRuns::Next::kTimeout) continue;
    if (absl::Status s = Apply(ev, up->tokenizer(), results); !s.ok() && failed.ok()) {
      failed = s;
      (*runs)->Cancel();
    }
  }
  if (!failed.ok()) return fail(failed);
  for (ChoiceResult& c : results) {
    ResolveToolCalls(r->tools, format, c);
    c.text.insert(0, echoed);
  }
  res.set_content(Dump(openai::WholeResponse(head, results)), "application/json");
  Log(request_id, req.path, res.status == -1 ? 200 : res.status, n, results, t0, "");
}

}  // namespace specserve
