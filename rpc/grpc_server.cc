#include "rpc/grpc_server.h"

#include <csignal>
#include <chrono>
#include <cstdio>
#include <thread>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace specserve::rpc {
namespace {

sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void GrpcServer::BlockTerminationSignals() {
  sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}

int GrpcServer::TakePendingSignal() {
  sigset_t set = TerminationSignals();
  timespec zero{};
  const int sig = sigtimedwait(&set, nullptr, &zero);
  return sig > 0 ? sig : 0;
}

int GrpcServer::WaitForSignal() {
  sigset_t set = TerminationSignals();
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  return sig;
}

void AddConnectionAgeFlags(CliArgs& args) {
  args.Flag("max-connection-age-s", "0",
            "close each client connection after this many seconds so clients re-resolve and reach new "
            "replicas (0: never)");
  args.Flag("max-connection-age-grace-s", "600", "how long streams on a connection past its age may finish");
}

absl::Status ParseConnectionAgeFlags(const CliArgs& args, ServerOptions* opts) {
  ASSIGN_OR_RETURN(opts->max_connection_age_seconds, args.Double("max-connection-age-s", 0, 30 * 86400));
  ASSIGN_OR_RETURN(opts->max_connection_age_grace_seconds, args.Double("max-connection-age-grace-s", 0, 86400));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(const ServerOptions& opts,
                                                              const std::vector<grpc::Service*>& services) {
  // Our own health service: NOT_SERVING from its first answer (gRPC's
  // default says SERVING until told otherwise).
  grpc::EnableDefaultHealthCheckService(false);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  auto s = std::unique_ptr<GrpcServer>(new GrpcServer());
  s->opts_ = opts;
  s->health_ = std::make_unique<HealthService>();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(opts.listen, MakeServerCredentials(opts.tls), &s->port_);
  // A port another process listens on is a start-up error, not a port the
  // kernel would share out between the two (gRPC's SO_REUSEPORT default).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(opts.max_message_bytes);
  builder.SetMaxSendMessageSize(opts.max_message_bytes);
  // Let clients keep session streams alive with pings every >= 10 s
  // (the default policy would answer them with GOAWAY).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  if (opts.max_connection_age_seconds > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                               static_cast<int>(opts.max_connection_age_seconds * 1000));
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                               static_cast<int>(opts.max_connection_age_grace_seconds * 1000));
  }
  builder.RegisterService(s->health_.get());
  for (grpc::Service* svc : services) builder.RegisterService(svc);
  s->server_ = builder.BuildAndStart();
  if (!s->server_ || s->port_ == 0) {
    if (opts.tls.enabled()) {
      return absl::UnavailableError(absl::StrCat("cannot listen with TLS on ", opts.listen,
                                                 " (the address is taken, or --tls-key ", opts.tls.key_path,
                                                 " is not the key of --tls-cert ", opts.tls.cert_path, ")"));
    }
    return absl::UnavailableError(absl::StrCat("cannot listen on ", opts.listen, " (is another process using it?)"));
  }
  if (opts.tls.enabled()) {
    log::Info(absl::StrCat("serving TLS on ", opts.listen, " (", opts.tls.cert_path,
                           "); client certificates must be signed by ", opts.tls.ca_path));
  }
  return s;
}

GrpcServer::~GrpcServer() {
  health_->Shutdown();
  if (server_ && !stopped_) server_->Shutdown(std::chrono::system_clock::now());
}

void GrpcServer::SetServing(bool serving) {
  absl::MutexLock lock(&mu_);
  if (draining_ && serving) return;  // once draining, NOT_SERVING for good
  health_->Set(serving);
}

void GrpcServer::Drain(const std::function<void()>& refuse_new, const std::function<int()>& active) {
  SetServing(false);
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
  }
  refuse_new();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(opts_.drain_seconds);
  int n = active();
  if (n > 0) log::Info(absl::StrFormat("draining %d session(s) for up to %.1f s", n, opts_.drain_seconds));
  while ((n = active()) > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (n > 0) log::Warn(absl::StrFormat("drain timeout: cancelling %d session(s)", n));
  // A short grace for calls that are finishing, then the rest are cancelled.
  health_->Shutdown();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  stopped_ = true;
}

}  // namespace specserve::rpc
