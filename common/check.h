// Invariant checks: a broken internal invariant aborts loudly (bad input never
// reaches these; it gets an absl::Status). Abseil 20220623 has no absl/log.
#pragma once

#include <cstdio>
#include <cstdlib>

#define SPECSERVE_CHECK(cond)                                                        \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)
