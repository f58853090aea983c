#include "common/build_info.h"

// Set by common/CMakeLists.txt for this file only.
#ifndef SPECSERVE_VERSION
#define SPECSERVE_VERSION "unknown"
#endif
#ifndef SPECSERVE_GIT_SHA
#define SPECSERVE_GIT_SHA "unknown"
#endif
#ifndef SPECSERVE_BACKENDS
#define SPECSERVE_BACKENDS "cpu"
#endif

namespace specserve {

const BuildInfo& GetBuildInfo() {
  static const BuildInfo info{
      SPECSERVE_VERSION,
      SPECSERVE_GIT_SHA,
#if defined(__clang__)
      "clang " __clang_version__,
#elif defined(__GNUC__)
      "gcc " __VERSION__,
#else
      "unknown",
#endif
      SPECSERVE_BACKENDS,
  };
  return info;
}

}  // namespace specserve
