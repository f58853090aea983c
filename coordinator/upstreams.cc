#include "coordinator/upstreams.h"

#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "rpc/proto_convert.h"
#include "rpc/status_convert.h"

namespace specserve {
namespace {

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& addr, const Upstreams::Options& opts) {
  const int max_bytes = opts.max_message_bytes;
  grpc::ChannelArguments args;
  args.SetLoadBalancingPolicyName(opts.lb_policy);
  args.SetMaxReceiveMessageSize(max_bytes);
  args.SetMaxSendMessageSize(max_bytes);
  // Sessions are long-lived streams: notice a vanished peer (a partition,
  // not a crash, which resets the connection) within ~30 s. The services
  // accept pings this often (rpc/grpc_server.cc).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 20000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  // A service that starts after the coordinator (or restarts) is reached
  // within a second, not after gRPC's default backoff of up to 120 s.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 250);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 250);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(addr, rpc::MakeChannelCredentials(opts.tls), args);
}

template <class Stub>
absl::StatusOr<v1::ModelInfo> FetchInfo(Stub& stub, std::chrono::milliseconds timeout, bool wait_for_ready) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  ctx.set_wait_for_ready(wait_for_ready);
  v1::ModelInfo info;
  grpc::Status s = stub.GetModelInfo(&ctx, v1::ModelInfoRequest(), &info);
  if (!s.ok()) return rpc::FromGrpc(s);
  return info;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerFrom(const v1::ModelInfo& info) {
  return rpc::TokenizerFromInfo(info.tokenizer());
}

}  // namespace

absl::StatusOr<std::unique_ptr<Upstreams>> Upstreams::Connect(const Options& opts) {
  auto up = std::unique_ptr<Upstreams>(new Upstreams());
  up->opts_ = opts;
  up->target_channel_ = MakeChannel(opts.target, opts);
  up->target_ = v1::TargetService::NewStub(up->target_channel_);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(opts.connect_timeout_seconds);
  absl::StatusOr<v1::ModelInfo> info;
  for (bool logged = false;; logged = true) {
    info = FetchInfo(*up->target_, std::chrono::milliseconds(250), /*wait_for_ready=*/true);
    if (info.ok() || std::chrono::steady_clock::now() >= give_up) break;
    if (opts.should_stop && opts.should_stop()) return absl::CancelledError("stopped while waiting for the target");
    if (!logged) log::Info(absl::StrCat("waiting for the target at ", opts.target, ": ", info.status().ToString()));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!info.ok()) {
    return absl::UnavailableError(absl::StrCat("target at ", opts.target, " did not answer: ", info.status().ToString()));
  }
  up->target_info_ = *info;
  ASSIGN_OR_RETURN(up->tokenizer_, TokenizerFrom(*info));
  up->grammar_ = std::make_unique<constrain::GrammarCompiler>(*up->tokenizer_);
  up->config_.name = info->name();
  up->config_.arch = info->arch();
  up->config_.vocab = info->vocab_size();
  up->config_.n_ctx = info->context_length();
  if (!opts.draft.empty()) {
    up->draft_ = v1::DraftService::NewStub(MakeChannel(opts.draft, opts));
    {
      absl::MutexLock lock(&up->mu_);
      up->draft_state_ = DraftState::kUnchecked;
    }
    absl::Status s = up->CheckDraft(std::chrono::milliseconds(2000), /*wait_for_ready=*/true);
    if (absl::IsInvalidArgument(s)) return s;  // the wrong draft: fail loudly
    if (!s.ok()) {
      log::Warn(absl::StrFormat("draft at %s not reachable yet (%s); using n-gram drafting until it is", opts.draft,
                                s.ToString()));
    }
  }
  Upstreams* self = up.get();
  up->watcher_ = std::thread([self] { self->Watch(); });
  return up;
}

Upstreams::~Upstreams() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (watcher_.joinable()) watcher_.join();
}

void Upstreams::Watch() {
  for (;;) {
    bool probe_draft = false;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      probe_draft = draft_state_ == DraftState::kUnchecked || (draft_state_ == DraftState::kOk && circuit_open_);
    }
    if (probe_draft) {
      const bool was_open = draft_circuit_open();
      if (CheckDraft(std::chrono::milliseconds(1000), /*wait_for_ready=*/true).ok()) {
        log::Info(absl::StrFormat("draft at %s is answering%s: speculative decoding with %s", opts_.draft,
                                  was_open ? " again" : "", draft_model()));
      }
    }
    WatchTarget();
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stopping_),
                         absl::FromChrono(probe_draft ? std::chrono::milliseconds(250) : opts_.health_interval));
  }
}

void Upstreams::WatchTarget() {
  if (!target_health_) target_health_ = grpc::health::v1::Health::NewStub(target_channel_);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(1000));
  grpc::health::v1::HealthCheckResponse resp;
  const bool serving = target_health_->Check(&ctx, grpc::health::v1::HealthCheckRequest(), &resp).ok() &&
                       resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
  if (serving == target_serving_.exchange(serving)) return;
  log::Line(serving ? log::Level::kInfo : log::Level::kWarn,
            absl::StrCat("target at ", opts_.target, serving ? " is serving again" : " is not serving"));
  if (opts_.on_target_health) opts_.on_target_health(serving);
}

void Upstreams::DraftFailed(absl::string_view why) {
  absl::MutexLock lock(&mu_);
  if (draft_state_ != DraftState::kOk || circuit_open_) return;
  circuit_open_ = true;
  log::Warn(absl::StrCat("draft at ", opts_.draft, " failed a call: skipping it until it answers again"),
            {{"error", why}});
}

bool Upstreams::draft_circuit_open() const {
  absl::MutexLock lock(&mu_);
  return draft_state_ == DraftState::kOk && circuit_open_;
}

absl::Status Upstreams::CheckDraft(std::chrono::milliseconds timeout, bool wait_for_ready) {
  absl::StatusOr<v1::ModelInfo> info = FetchInfo(*draft_, timeout, wait_for_ready);
  absl::MutexLock lock(&mu_);
  if (!info.ok()) return info.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = TokenizerFrom(*info);
  absl::Status same = tok.ok() ? CheckSameVocabulary(**tok, *tokenizer_) : tok.status();
  if (!same.ok()) {
    draft_state_ = DraftState::kRefused;
    log::Error(absl::StrFormat("refusing the draft at %s (%s): %s", opts_.draft, info->name(), same.ToString()));
    return absl::InvalidArgumentError(absl::StrCat("draft vocabulary differs from the target's: ", same.message()));
  }
  draft_state_ = DraftState::kOk;
  circuit_open_ = false;
  draft_model_ = info->name();
  return absl::OkStatus();
}

v1::DraftService::StubInterface* Upstreams::draft() {
  absl::MutexLock lock(&mu_);
  return draft_state_ == DraftState::kOk && !circuit_open_ ? draft_.get() : nullptr;
}

std::string Upstreams::draft_model() const {
  absl::MutexLock lock(&mu_);
  return draft_state_ == DraftState::kOk ? draft_model_ : "";
}

}  // namespace specserve
