// --cpu-activations int8 through the three services (the Q4_K_M target and
// the Q8_0 draft, both with int8 activations): the services say which
// arithmetic they run, and greedy output with the model drafter (fixed and
// adaptive K) equals plain greedy decoding of the same int8 target. A bad
// value is a usage error before the model loads.
#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/e2e_harness.h"
#include "tests/test_paths.h"

namespace specserve {
namespace {

using e2e::Cluster;

v1::GenerateRequest Greedy(const std::string& text, v1::Drafter drafter, int k) {
  v1::GenerateRequest req;
  req.set_text(text);
  req.set_max_tokens(40);
  req.set_drafter(drafter);
  if (k < 0) {
    req.set_adaptive_k(true);
  } else {
    req.set_k(k);
  }
  return req;
}

TEST(Int8Activations, SpeculativeGreedyEqualsPlainThroughTheServices) {
  const std::string target = testing::SharedPath("models/variants/code-target-7m-q4_k_m.gguf");
  const std::string draft = testing::SharedPath("models/variants/code-draft-1m-q8_0.gguf");
  if (target.empty() || draft.empty()) SPECSERVE_MISSING_INPUT("quantized variants");
  e2e::ClusterOptions o;
  o.target_args = {"--model", target, "--cpu-activations", "int8"};
  o.draft_args = {"--model", draft, "--cpu-activations", "int8"};
  Cluster c(o);
  ASSERT_TRUE(c.ready) << c.Logs();
  EXPECT_NE(c.target->LogTail().find("int8 activations"), std::string::npos) << c.Logs();
  EXPECT_NE(c.draft->LogTail().find("int8 activations"), std::string::npos) << c.Logs();
  for (const char* text : {"def fibonacci(n):", "class Stack:\n    def __init__(self):"}) {
    const e2e::StreamResult plain = e2e::Generate(*c.stub, Greedy(text, v1::DRAFTER_NONE, 0));
    ASSERT_TRUE(plain.status.ok()) << plain.status.error_message() << c.Logs();
    ASSERT_EQ(plain.ids.size(), 40u);
    for (int k : {4, -1}) {
      const e2e::StreamResult spec = e2e::Generate(*c.stub, Greedy(text, v1::DRAFTER_MODEL, k));
      ASSERT_TRUE(spec.status.ok()) << spec.status.error_message() << c.Logs();
      EXPECT_EQ(spec.ids, plain.ids) << text << ", k " << k;
    }
  }
}

TEST(Int8Activations, ABadValueIsAUsageError) {
  for (const char* service : {"specserve-target", "specserve-draft"}) {
    const std::string cmd = std::string(SPECSERVE_BINARY_DIR) + "/bin/" + service +
                            " --listen 127.0.0.1:0 --metrics-port 0 --cpu-activations bf16"
                            " --model /nonexistent/model.gguf 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[512];
    while (fgets(buf, sizeof(buf), p) != nullptr) out += buf;
    const int st = pclose(p);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 2) << service << ": " << out;
    EXPECT_NE(out.find("--cpu-activations must be fp32 or int8"), std::string::npos) << service << ": " << out;
  }
}

}  // namespace
}  // namespace specserve
