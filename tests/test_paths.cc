#include "tests/test_paths.h"

#include <cstdlib>
#include <filesystem>

namespace specserve::testing {
std::string SourceDir() { return SPECSERVE_SOURCE_DIR; }
std::string BinDir() { return std::string(SPECSERVE_BINARY_DIR) + "/bin"; }
std::string BundledModel(const std::string& file) { return SourceDir() + "/models/" + file; }
std::string SharedPath(const std::string& rel) {
  const char* env = std::getenv("SPECSERVE_SHARED");
  std::string root = env ? env : SourceDir() + "/../shared";
  std::string p = root + "/" + rel;
  return std::filesystem::exists(p) ? p : "";
}
std::string GoldenPath(const std::string& file) {
  const std::string kept = SourceDir() + "/tests/data/" + file;
  return std::filesystem::exists(kept) ? kept : SharedPath("golden/" + file);
}
bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}
}  // namespace specserve::testing
