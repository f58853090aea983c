// --device on the model services: checked before anything else (before the
// model loads, so the model path here does not even exist), with a clear
// error for an ordinal the machine does not have, or for a binary or
// machine without CUDA. Exit status 2 (a usage error) either way.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

namespace specserve {
namespace {

struct RunResult {
  int status = -1;
  std::string output;
};

RunResult RunCommand(const std::string& cmd) {
  RunResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 512> buf;
  while (fgets(buf.data(), buf.size(), p) != nullptr) r.output += buf.data();
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

TEST(DeviceFlag, AnOrdinalTheMachineLacksFailsBeforeLoading) {
  for (const char* service : {"specserve-target", "specserve-draft"}) {
    const std::string bin = std::string(SPECSERVE_BINARY_DIR) + "/bin/" + service;
    const RunResult r = RunCommand(bin + " --listen 127.0.0.1:0 --metrics-port 0 --backend cuda --device 63"
                                   " --model /nonexistent/model.gguf");
    EXPECT_EQ(r.status, 2) << service << ": " << r.output;
    const bool clear = r.output.find("--device 63: this machine has") != std::string::npos ||
                       r.output.find("no CUDA device") != std::string::npos ||
                       r.output.find("built without CUDA") != std::string::npos;
    EXPECT_TRUE(clear) << service << ": " << r.output;
    EXPECT_EQ(r.output.find("nonexistent"), std::string::npos) << service << " loaded the model first: " << r.output;
  }
}

}  // namespace
}  // namespace specserve
