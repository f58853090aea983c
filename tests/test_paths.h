// Where tests find the bundled models, ../shared and the built binaries.
#pragma once
#include <string>

namespace specserve::testing {
std::string SourceDir();            // the repository root
std::string BinDir();               // build/bin
std::string BundledModel(const std::string& file);  // models/FILE
// ../shared/PATH beside the checkout (or $SPECSERVE_SHARED/PATH); "" if absent.
std::string SharedPath(const std::string& rel);
}  // namespace specserve::testing
