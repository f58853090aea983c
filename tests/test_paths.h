// Where tests find the bundled models, ../shared and the built binaries.
#pragma once
#include <string>

namespace specserve::testing {
std::string SourceDir();            // the repository root
std::string BinDir();               // build/bin
std::string BundledModel(const std::string& file);  // models/FILE
// ../shared/PATH beside the checkout (or $SPECSERVE_SHARED/PATH); "" if absent.
std::string SharedPath(const std::string& rel);
// A golden reference: tests/data/FILE (copies kept in the repository), else
// ../shared/golden/FILE; "" if neither exists.
std::string GoldenPath(const std::string& file);
// CI=true in the environment: a missing input is a failure, never a skip.
bool InCi();
}  // namespace specserve::testing

// A test input that is not there (a model or golden file of ../shared):
// skipped where a developer lacks it, a failure under CI=true.
#define SPECSERVE_MISSING_INPUT(what)                                                 \
  do {                                                                                \
    if (::specserve::testing::InCi()) {                                               \
      GTEST_FAIL() << (what) << " is missing (CI=true: a missing input is a failure)"; \
    } else {                                                                          \
      GTEST_SKIP() << (what) << " is not present";                                    \
    }                                                                                 \
  } while (0)
