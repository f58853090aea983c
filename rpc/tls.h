// Optional mutual TLS between the coordinator and the target and draft
// services: the --tls-cert / --tls-key / --tls-ca flags, reading the PEM
// files at start-up (a missing or unreadable file is a start-up error that
// names the flag and the path), and the gRPC credentials built from them.
//
//   services:    serve TLS with --tls-cert/--tls-key and require a client
//                certificate signed by --tls-ca;
//   coordinator: present --tls-cert/--tls-key to the services and verify
//                their certificates against --tls-ca (and their names
//                against the HOST of --target / --draft).
// All three empty: plaintext, as before. Some but not all: an error.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "common/cli_args.h"

namespace specserve::rpc {

struct TlsConfig {
  std::string cert_path, key_path, ca_path;  // as given, for messages
  std::string cert_pem, key_pem, ca_pem;     // the files' contents
  // Servers: the names (certificate CN or DNS SAN) a client certificate must
  // carry to use the model services (--tls-allowed-clients); empty: any
  // certificate the CA signed.
  std::vector<std::string> allowed_clients;
  bool enabled() const { return !cert_pem.empty(); }
};

enum class TlsRole { kServer, kClient };

// Declares --tls-cert, --tls-key and --tls-ca with help text for the role.
void DeclareTlsFlags(CliArgs& args, TlsRole role);
// Reads the three files named by the flags. INVALID_ARGUMENT when only some
// are given, or a file is missing, unreadable, empty or not PEM.
absl::StatusOr<TlsConfig> ReadTlsFlags(const CliArgs& args);

// OK when TLS is off, no names are required, or the call's client
// certificate names one of `tls.allowed_clients`; PERMISSION_DENIED naming
// the certificate's names otherwise.
grpc::Status CheckClientAllowed(const TlsConfig& tls, const grpc::ServerContextBase& ctx);

// InsecureServerCredentials when !tls.enabled(); otherwise TLS that requires
// and verifies a client certificate signed by the CA.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const TlsConfig& tls);
// InsecureChannelCredentials when !tls.enabled(); otherwise TLS that
// verifies the server against the CA and presents the certificate and key.
std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const TlsConfig& tls);

}  // namespace specserve::rpc
