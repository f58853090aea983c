// What this binary is: its version, the git commit it was configured from
// ("unknown" outside a git checkout), the compiler, and the backends built in.
// Exported by every process as specserve_build_info{...} 1 (rpc/metrics_server.h)
// and printed in its start-up log line.
#pragma once

#include <string>

namespace specserve {

struct BuildInfo {
  std::string version;   // "0.1.0"
  std::string git_sha;   // 12 hex digits at configure time, or "unknown"
  std::string compiler;  // "gcc 12.2.0", "clang 14.0.6"
  std::string backend;   // backends compiled in: "cpu" or "cpu+cuda"
};

const BuildInfo& GetBuildInfo();

}  // namespace specserve
