#include "rpc/tls.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace specserve::rpc {
namespace {

// The contents of the PEM file `path` given as --`flag`, which must hold a
// block whose BEGIN line contains `kind` ("CERTIFICATE", "PRIVATE KEY").
absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path, const char* kind) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": cannot read ", path, ": ", std::strerror(errno)));
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot read ", path));
  }
  std::string pem = buf.str();
  if (pem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot read ", path, " (empty, or not a file)"));
  }
  const size_t begin = pem.find("-----BEGIN ");
  const size_t eol = begin == std::string::npos ? begin : pem.find("-----", begin + 11);
  if (begin == std::string::npos || eol == std::string::npos ||
      !absl::StrContains(pem.substr(begin, eol - begin), kind)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": ", path, " is not a PEM file with a ", kind));
  }
  return pem;
}

}  // namespace

void DeclareTlsFlags(CliArgs& a, TlsRole role) {
  if (role == TlsRole::kServer) {
    a.Flag("tls-cert", "",
           "PEM certificate (chain) to serve gRPC over TLS with; needs --tls-key and --tls-ca "
           "(all three empty: plaintext)");
    a.Flag("tls-key", "", "PEM private key of --tls-cert");
    a.Flag("tls-ca", "",
           "PEM CA certificate(s): clients must present a certificate signed by one of them (mutual TLS)");
    a.Flag("tls-allowed-clients", "specserve-coordinator",
           "comma-separated names (certificate CN or DNS SAN) a client certificate must carry to open sessions "
           "(empty: any certificate --tls-ca signed)");
  } else {
    a.Flag("tls-cert", "",
           "PEM client certificate presented to the target and draft services (mutual TLS); needs "
           "--tls-key and --tls-ca (all three empty: plaintext). The --listen port stays plaintext");
    a.Flag("tls-key", "", "PEM private key of --tls-cert");
    a.Flag("tls-ca", "",
           "PEM CA certificate(s) the services' certificates must be signed by; each must name the HOST "
           "of --target / --draft");
  }
}

absl::StatusOr<TlsConfig> ReadTlsFlags(const CliArgs& a) {
  TlsConfig t;
  t.cert_path = a.Str("tls-cert");
  t.key_path = a.Str("tls-key");
  t.ca_path = a.Str("tls-ca");
  const int given = !t.cert_path.empty() + !t.key_path.empty() + !t.ca_path.empty();
  if (given == 0) return t;
  if (given != 3) {
    std::string missing;
    auto note = [&](const char* flag, const std::string& path) {
      if (path.empty()) absl::StrAppend(&missing, missing.empty() ? "" : ", ", "--", flag);
    };
    note("tls-cert", t.cert_path);
    note("tls-key", t.key_path);
    note("tls-ca", t.ca_path);
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-cert, --tls-key and --tls-ca go together (missing ", missing, ")"));
  }
  auto cert = ReadPem("tls-cert", t.cert_path, "CERTIFICATE");
  if (!cert.ok()) return cert.status();
  auto key = ReadPem("tls-key", t.key_path, "PRIVATE KEY");
  if (!key.ok()) return key.status();
  auto ca = ReadPem("tls-ca", t.ca_path, "CERTIFICATE");
  if (!ca.ok()) return ca.status();
  t.cert_pem = std::move(*cert);
  t.key_pem = std::move(*key);
  t.ca_pem = std::move(*ca);
  return t;
}

grpc::Status CheckClientAllowed(const TlsConfig& tls, const grpc::ServerContextBase& ctx) {
  if (!tls.enabled() || tls.allowed_clients.empty()) return grpc::Status::OK;
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  std::vector<std::string> names;
  if (auth) {
    for (const char* property : {"x509_common_name", "x509_subject_alternative_name"}) {
      for (const grpc::string_ref& v : auth->FindPropertyValues(property)) names.emplace_back(v.data(), v.size());
    }
  }
  for (const std::string& n : names) {
    if (std::find(tls.allowed_clients.begin(), tls.allowed_clients.end(), n) != tls.allowed_clients.end()) {
      return grpc::Status::OK;
    }
  }
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      absl::StrCat("client certificate (", names.empty() ? "no names" : absl::StrJoin(names, ", "),
                                   ") is not one of --tls-allowed-clients ",
                                   absl::StrJoin(tls.allowed_clients, ",")));
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const TlsConfig& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions opts(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  opts.pem_root_certs = tls.ca_pem;
  opts.pem_key_cert_pairs.push_back({tls.key_pem, tls.cert_pem});
  return grpc::SslServerCredentials(opts);
}

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const TlsConfig& tls) {
  if (!tls.enabled()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions opts;
  opts.pem_root_certs = tls.ca_pem;
  opts.pem_private_key = tls.key_pem;
  opts.pem_cert_chain = tls.cert_pem;
  return grpc::SslCredentials(opts);
}

}  // namespace specserve::rpc
