// specserve-health-probe: asks a server's grpc.health.v1 service whether it
// is SERVING. Built beside the servers so that the container images carry a
// probe without downloading one (Docker HEALTHCHECK, `docker compose`
// dependencies, scripts); Kubernetes uses its own native gRPC probes.
//
// Exit status: 0 SERVING, 1 NOT_SERVING (or UNKNOWN, or an unknown service
// name), 2 the call failed (nothing listening, deadline, TLS refused), 3 bad
// flags. With --wait it keeps asking until SERVING or the time is up.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "common/cli_args.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace specserve {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

struct ProbeOptions {
  std::string addr;
  std::string service;
  double timeout_seconds = 2;
  double wait_seconds = 0;
  bool quiet = false;
  // Mutual TLS: the CA that signed the server's certificate, and this
  // client's certificate and key (both or neither).
  std::string tls_ca, tls_cert, tls_key, tls_server_name;
};

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

std::shared_ptr<grpc::Channel> MakeChannel(const ProbeOptions& o, std::string* error) {
  grpc::ChannelArguments args;
  if (o.tls_ca.empty() && o.tls_cert.empty()) {
    return grpc::CreateCustomChannel(o.addr, grpc::InsecureChannelCredentials(), args);
  }
  grpc::SslCredentialsOptions ssl;
  if (!o.tls_ca.empty() && !ReadFile(o.tls_ca, &ssl.pem_root_certs)) {
    *error = "cannot read --tls-ca " + o.tls_ca;
    return nullptr;
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    *error = "--tls-cert and --tls-key go together";
    return nullptr;
  }
  if (!o.tls_cert.empty() &&
      (!ReadFile(o.tls_cert, &ssl.pem_cert_chain) || !ReadFile(o.tls_key, &ssl.pem_private_key))) {
    *error = "cannot read --tls-cert / --tls-key";
    return nullptr;
  }
  if (!o.tls_server_name.empty()) args.SetSslTargetNameOverride(o.tls_server_name);
  return grpc::CreateCustomChannel(o.addr, grpc::SslCredentials(ssl), args);
}

int Probe(const ProbeOptions& o) {
  std::string error;
  std::shared_ptr<grpc::Channel> channel = MakeChannel(o, &error);
  if (!channel) {
    std::fprintf(stderr, "specserve-health-probe: %s\n", error.c_str());
    return 3;
  }
  auto stub = Health::NewStub(channel);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(o.wait_seconds);
  for (;;) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::duration_cast<std::chrono::milliseconds>(
                                                            std::chrono::duration<double>(o.timeout_seconds)));
    HealthCheckRequest req;
    req.set_service(o.service);
    HealthCheckResponse resp;
    grpc::Status s = stub->Check(&ctx, req, &resp);
    int rc;
    std::string what;
    if (!s.ok()) {
      // NOT_FOUND is the health service's answer for an unknown service name.
      rc = s.error_code() == grpc::StatusCode::NOT_FOUND ? 1 : 2;
      what = "error " + std::to_string(s.error_code()) + ": " + s.error_message();
    } else {
      rc = resp.status() == HealthCheckResponse::SERVING ? 0 : 1;
      what = HealthCheckResponse::ServingStatus_Name(resp.status());
    }
    if (rc == 0 || std::chrono::steady_clock::now() >= give_up) {
      if (!o.quiet) std::printf("%s%s%s: %s\n", o.addr.c_str(), o.service.empty() ? "" : " ", o.service.c_str(),
                                what.c_str());
      return rc;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

int Main(int argc, char** argv) {
  CliArgs args(
      "usage: specserve-health-probe [--addr HOST:PORT] [--service NAME] [--wait SECONDS] [flags]\n"
      "Asks a specserve server's grpc.health.v1 service whether it is SERVING.\n"
      "Exit status: 0 SERVING, 1 NOT_SERVING, 2 the call failed, 3 bad flags.");
  const char* env_addr = std::getenv("SPECSERVE_HEALTH_ADDR");
  args.Flag("addr", env_addr && *env_addr ? env_addr : "127.0.0.1:50051",
            "the server, HOST:PORT (default from $SPECSERVE_HEALTH_ADDR)");
  args.Flag("service", "", "the service name to ask about (empty: the whole server)");
  args.Flag("timeout", "2", "seconds one check may take");
  args.Flag("wait", "0", "keep checking until SERVING for up to this many seconds");
  args.Flag("tls-ca", "", "PEM CA certificate that signed the server's certificate (enables TLS)");
  args.Flag("tls-cert", "", "PEM client certificate for mutual TLS");
  args.Flag("tls-key", "", "PEM private key of --tls-cert");
  args.Flag("tls-server-name", "", "expect this name in the server's certificate instead of HOST");
  args.BoolFlag("quiet", "print nothing; the exit status says it all");
  if (absl::Status s = args.Parse(argc, argv); !s.ok()) {
    std::fprintf(stderr, "specserve-health-probe: %s\n%s", s.ToString().c_str(), args.HelpText().c_str());
    return 3;
  }
  if (args.help()) return std::fputs(args.HelpText().c_str(), stdout), 0;
  ProbeOptions o;
  o.addr = args.Str("addr");
  o.service = args.Str("service");
  o.tls_ca = args.Str("tls-ca");
  o.tls_cert = args.Str("tls-cert");
  o.tls_key = args.Str("tls-key");
  o.tls_server_name = args.Str("tls-server-name");
  o.quiet = args.Bool("quiet");
  absl::StatusOr<double> timeout = args.Double("timeout", 0.001, 3600);
  absl::StatusOr<double> wait = args.Double("wait", 0, 86400);
  if (!timeout.ok() || !wait.ok()) {
    std::fprintf(stderr, "specserve-health-probe: %s\n",
                 (!timeout.ok() ? timeout.status() : wait.status()).ToString().c_str());
    return 3;
  }
  o.timeout_seconds = *timeout;
  o.wait_seconds = *wait;
  return Probe(o);
}

}  // namespace
}  // namespace specserve

int main(int argc, char** argv) { return specserve::Main(argc, argv); }
