#include "tests/test_paths.h"

#include <cstdlib>
#include <filesystem>

namespace specserve::testing {
std::string SourceDir() { return SPECSERVE_SOURCE_DIR; }
// SPECSERVE_BIN_DIR: the servers the end-to-end tests start, where the
// binaries travelled without their build tree (bench/gpu.sh).
std::string BinDir() {
  const char* env = std::getenv("SPECSERVE_BIN_DIR");
  return env != nullptr ? std::string(env) : std::string(SPECSERVE_BINARY_DIR) + "/bin";
}
std::string BundledModel(const std::string& file) {
  const std::string in_tree = SourceDir() + "/models/" + file;
  if (std::filesystem::exists(in_tree)) return in_tree;
  const char* env = std::getenv("SPECSERVE_SHARED");  // bench/gpu.sh links the models there
  const std::string shared = env != nullptr ? std::string(env) + "/models/" + file : "";
  return !shared.empty() && std::filesystem::exists(shared) ? shared : in_tree;
}
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
