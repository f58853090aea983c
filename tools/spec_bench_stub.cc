#include <cstdio>

#include "tools/commands.h"

namespace specserve::cli {
int SpecBench(int, char**) {
  std::fprintf(stderr, "spec-bench: not built yet\n");
  return 1;
}
}  // namespace specserve::cli
