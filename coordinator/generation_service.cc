#include "coordinator/generation_service.h"

#include <memory>
#include <thread>

#include "coordinator/request_log.h"
#include "rpc/bidi_session.h"
#include "rpc/service_metrics.h"
#include "rpc/status_convert.h"

namespace specserve {
namespace {

using Resp = v1::GenerateResponse;

// The caller's x-request-id or a new one, sent back in the initial metadata.
std::string TakeRequestId(grpc::CallbackServerContext* ctx) {
  auto it = ctx->client_metadata().find(kRequestIdHeader);
  const std::string given = it == ctx->client_metadata().end() ? "" : std::string(it->second.data(), it->second.size());
  std::string id = RequestId(given);
  ctx->AddInitialMetadata(kRequestIdHeader, id);
  return id;
}

// The caller's traceparent's child span, or a new trace; sent back in the
// initial metadata.
TraceContext TakeTrace(grpc::CallbackServerContext* ctx) {
  auto it = ctx->client_metadata().find(kTraceparentHeader);
  TraceContext trace =
      IncomingTrace(it == ctx->client_metadata().end() ? "" : absl::string_view(it->second.data(), it->second.size()));
  ctx->AddInitialMetadata(kTraceparentHeader, trace.Header());
  return trace;
}

void Log(const std::string& id, const TraceContext& trace, const char* what, const absl::StatusOr<v1::Final>& final,
         std::chrono::steady_clock::time_point arrived) {
  RequestLogLine line{"grpc", id, what, absl::StatusCodeToString(final.status().code())};
  line.arrived = arrived;
  if (final.ok()) {
    line.prompt_tokens = final->stats().prompt_tokens();
    line.completion_tokens = final->stats().tokens();
  } else {
    line.note = std::string(final.status().message());
  }
  LogRequest(line, trace.trace_id);
}

// Server streaming: deltas as rounds commit, then the final message.
class GenerateCall final : public grpc::ServerWriteReactor<Resp>, public rpc::StreamHandle<Resp>::Writer {
 public:
  GenerateCall(GenerationService* svc, grpc::CallbackServerContext* ctx, const v1::GenerateRequest& req)
      : svc_(svc), handle_(std::make_shared<rpc::StreamHandle<Resp>>(this)), cancel_(std::make_shared<CancelGroup>()) {
    const auto arrived = std::chrono::steady_clock::now();
    std::string id = TakeRequestId(ctx);
    TraceContext trace = TakeTrace(ctx);
    // The worker owns copies of everything it needs: the reactor may be gone
    // before the worker returns from Finish.
    auto work = [svc, handle = handle_, cancel = cancel_, req, deadline = ctx->deadline(), arrived, id, trace] {
      RequestContext rc = svc->Context(cancel.get(), deadline, arrived);
      rc.request_id = id;
      rc.trace = trace;
      rc.on_delta = [&handle](v1::Delta d) {
        Resp r;
        *r.mutable_delta() = std::move(d);
        handle->Send(std::move(r));
        return true;  // a client that left is seen through OnCancel
      };
      absl::StatusOr<v1::Final> final = RunGeneration(req, svc->options(), rc);
      Log(id, trace, "Generate", final, arrived);
      const grpc::Status st = rpc::ToGrpc(final.status());
      if (final.ok()) {
        Resp r;
        *r.mutable_final() = std::move(*final);
        handle->Send(std::move(r));
      }
      svc->EndRequest(st);  // the slot is free before the client hears the end
      handle->Finish(st);
    };
    ticket_ = svc->Enqueue(1, ctx->deadline(),
                           [svc, handle = handle_, work = std::move(work), id, trace, arrived](absl::Status s) {
                             if (s.ok()) return svc->Spawn(work);
                             const grpc::Status st = rpc::ToGrpc(s);
                             svc->CountRequest(st);
                             Log(id, trace, "Generate", s, arrived);
                             handle->Finish(st);
                           });
  }

  void OnWriteDone(bool ok) override { handle_->WriteDone(ok); }
  void OnCancel() override {
    cancel_->Cancel();
    svc_->Dequeue(ticket_.load());
  }
  void OnDone() override {
    handle_->Detach();
    delete this;
  }
  void DoWrite(const Resp* msg) override { StartWrite(msg); }
  void DoFinish(const grpc::Status& s) override { Finish(s); }

 private:
  GenerationService* svc_;
  std::shared_ptr<rpc::StreamHandle<Resp>> handle_;
  std::shared_ptr<CancelGroup> cancel_;
  std::atomic<uint64_t> ticket_{0};
};

// Unary: the same run, collected into one response.
class UnaryCall final : public grpc::ServerUnaryReactor {
 public:
  UnaryCall(GenerationService* svc, grpc::CallbackServerContext* ctx, const v1::GenerateRequest& req,
            v1::GenerateUnaryResponse* resp)
      : svc_(svc), cancel_(std::make_shared<CancelGroup>()) {
    const auto arrived = std::chrono::steady_clock::now();
    std::string id = TakeRequestId(ctx);
    TraceContext trace = TakeTrace(ctx);
    // `this` and `resp` stay valid until Finish below (OnDone comes after it).
    auto work = [this, svc, resp, req, deadline = ctx->deadline(), arrived, cancel = cancel_, id, trace] {
      RequestContext rc = svc->Context(cancel.get(), deadline, arrived);
      rc.request_id = id;
      rc.trace = trace;
      rc.on_delta = [resp](v1::Delta d) {
        resp->mutable_text()->append(d.text());
        resp->mutable_token_ids()->MergeFrom(d.token_ids());
        resp->mutable_logprobs()->MergeFrom(d.logprobs());
        return true;
      };
      absl::StatusOr<v1::Final> final = RunGeneration(req, svc->options(), rc);
      Log(id, trace, "GenerateUnary", final, arrived);
      const grpc::Status st = rpc::ToGrpc(final.status());
      if (final.ok()) {
        resp->set_finish_reason(final->finish_reason());
        *resp->mutable_stats() = final->stats();
      }
      svc->EndRequest(st);  // the slot is free before the client hears the end
      Finish(st);
    };
    ticket_ = svc->Enqueue(1, ctx->deadline(), [this, svc, work = std::move(work), id, trace, arrived](absl::Status s) {
      if (s.ok()) return svc->Spawn(work);
      const grpc::Status st = rpc::ToGrpc(s);
      svc->CountRequest(st);
      Log(id, trace, "GenerateUnary", s, arrived);
      Finish(st);
    });
  }

  void OnCancel() override {
    cancel_->Cancel();
    svc_->Dequeue(ticket_.load());
  }
  void OnDone() override { delete this; }

 private:
  GenerationService* svc_;
  std::shared_ptr<CancelGroup> cancel_;
  std::atomic<uint64_t> ticket_{0};
};

}  // namespace

grpc::ServerWriteReactor<Resp>* GenerationService::Generate(grpc::CallbackServerContext* ctx,
                                                            const v1::GenerateRequest* req) {
  return new GenerateCall(this, ctx, *req);
}

grpc::ServerUnaryReactor* GenerationService::GenerateUnary(grpc::CallbackServerContext* ctx,
                                                           const v1::GenerateRequest* req,
                                                           v1::GenerateUnaryResponse* resp) {
  return new UnaryCall(this, ctx, *req, resp);
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(grpc::CallbackServerContext* ctx,
                                                          const v1::GetModelInfoRequest*,
                                                          v1::GetModelInfoResponse* resp) {
  grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
  Upstreams* up = upstreams();
  if (up == nullptr) {
    r->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "waiting for the target service"));
    return r;
  }
  const v1::ModelInfo& t = up->target_info();
  resp->set_target_model(t.name());
  resp->set_draft_model(up->draft_model());
  resp->set_vocab_size(t.vocab_size());
  resp->set_context_length(t.context_length());
  resp->set_tokenizer(t.tokenizer().model());
  resp->set_default_k(opts_.default_k);
  r->Finish(grpc::Status::OK);
  return r;
}

GenerationService::GenerationService(CoordinatorMetrics* metrics, CoordinatorOptions opts, RequestQueue::Options queue)
    : metrics_(metrics), opts_(opts), queue_([&] {
        if (metrics != nullptr) {
          queue.on_waiting = [metrics](int delta) { metrics->requests_waiting.Increment(delta); };
        }
        return std::move(queue);
      }()),
      workers_(queue.max_running) {}  // an int: the move into queue_ left it as it was

uint64_t GenerationService::Enqueue(int slots, std::chrono::system_clock::time_point deadline,
                                    RequestQueue::Decision decide) {
  if (upstreams() == nullptr) {
    decide(absl::UnavailableError("waiting for the target service"));
    return 0;
  }
  return queue_.Submit(slots, SteadyDeadline(deadline), std::move(decide));
}

void GenerationService::Spawn(std::function<void()> work) { workers_.Run(std::move(work)); }

void GenerationService::EndRequest(const grpc::Status& s) {
  CountRequest(s);
  queue_.Release(1);
}

RequestContext GenerationService::Context(CancelGroup* cancel, std::chrono::system_clock::time_point deadline,
                                          std::chrono::steady_clock::time_point arrived) {
  RequestContext rc;
  rc.upstreams = upstreams();
  rc.metrics = metrics_;
  rc.cancel = cancel;
  rc.deadline = deadline;
  rc.arrived = arrived;
  return rc;
}

void GenerationService::CountRequest(const grpc::Status& s) {
  if (metrics_) metrics_->Requests(rpc::StatusLabel(s.error_code())).Increment();
}

}  // namespace specserve
