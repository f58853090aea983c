// Generated documents checked against their JSON Schemas by Debian's
// python3-jsonschema (tests/constrain_validate.py), the reference the
// grammar library's tests and the end-to-end structured-output test share.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_paths.h"

namespace specserve::testing {

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// REQUESTS: the text of [{"schema": ..., "doc": "<text>"}]. One string per
// request: "" when the doc parses and validates (formats checked), else
// why. Sets *missing when python3 or jsonschema is not installed; *err says
// what ran.
inline std::vector<std::string> ValidateWithJsonSchema(const std::string& requests, bool* missing,
                                                       std::string* err) {
  const std::string dir = ::testing::TempDir();
  const std::string req = dir + "/constrain_requests.json", out = dir + "/constrain_results.json",
                    errf = dir + "/constrain_validate.stderr";
  std::ofstream(req) << requests;
  std::filesystem::remove(out);
  const std::string py = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  const std::string cmd = py + " '" + SourceDir() + "/tests/constrain_validate.py' '" + req + "' '" + out +
                          "' 2>'" + errf + "'";
  const int rc = std::system(cmd.c_str());
  const int code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  *missing = code == 3 || code == 127;
  *err = cmd + "\n" + ReadAll(errf);
  if (code != 0) return {};
  return nlohmann::json::parse(ReadAll(out)).get<std::vector<std::string>>();
}

// The schema set of tests/data/schemas, sorted by file name.
inline std::vector<std::filesystem::path> SchemaSet() {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(SourceDir() + "/tests/data/schemas"))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace specserve::testing
