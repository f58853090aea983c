// general.architecture = qwen2: q/k/v biases and rotate-half (NEOX) RoPE,
// against golden_qwen2.json (fp32 PyTorch; llama.cpp's qwen2 path gives the
// same continuations). The biases change 4 of the 8 continuations, so a
// forward pass that ignores them fails here.
#include <algorithm>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/backend.h"
#include "common/tokenizer.h"
#include "common/weights.h"
#include "tests/test_paths.h"

namespace specserve {
namespace {

using nlohmann::json;

TEST(Qwen2Test, ConfigReadsQwen2Keys) {
  const std::string path = testing::SharedPath("models/variants/code-target-7m-qwen2.gguf");
  if (path.empty()) GTEST_SKIP() << "code-target-7m-qwen2.gguf not present";
  auto model = Model::Load(path);
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelConfig& c = (*model)->config;
  EXPECT_EQ(c.arch, "qwen2");
  EXPECT_TRUE(c.rope_neox);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_EQ(c.n_embd, 288);
  EXPECT_EQ(c.n_head, 6);
  EXPECT_EQ(c.n_head_kv, 2);
  EXPECT_EQ(c.rope_dim, 48);
  const LayerWeights& l = (*model)->weights.layers[0];
  EXPECT_NE(l.bq, nullptr);
  EXPECT_NE(l.bk, nullptr);
  EXPECT_NE(l.bv, nullptr);
}

TEST(Qwen2Test, MatchesGolden) {
  const std::string golden_path = testing::SharedPath("golden/golden_qwen2.json");
  if (golden_path.empty()) GTEST_SKIP() << "../shared/golden/golden_qwen2.json not present";
  std::ifstream in(golden_path);
  const json golden = json::parse(in);
  const std::string path =
      testing::SharedPath("models/variants/" + golden["file"].get<std::string>());
  if (path.empty()) GTEST_SKIP() << golden["file"] << " not present";
  auto model = Model::Load(path);
  ASSERT_TRUE(model.ok()) << model.status();
  // The prompts' ids are the SentencePiece ones of golden.json.
  auto tok = Tokenizer::FromGguf(*(*model)->file);
  ASSERT_TRUE(tok.ok()) << tok.status();
  BackendOptions opts;
  opts.threads = 2;
  auto backend = MakeCpuBackend(**model, opts);
  ASSERT_TRUE(backend.ok()) << backend.status();
  Backend& b = **backend;
  const int32_t V = (*model)->config.vocab;
  auto argmax = [&](const std::vector<float>& l) {
    return static_cast<TokenId>(std::max_element(l.begin(), l.begin() + V) - l.begin());
  };
  float worst = 0;
  for (const json& p : golden["prompts"]) {
    const auto ids = p["ids"].get<std::vector<TokenId>>();
    KvSeq seq;
    std::vector<float> logits;
    ASSERT_TRUE(b.Forward({ForwardSeq{&seq, ids, 1}}, &logits).ok());
    for (const json& kv : p["last_logits_top5"]) {
      const int id = kv[0].get<int>();
      const float want = kv[1].get<float>();
      const float tol = 1e-3f * std::max(1.0f, std::abs(want));
      EXPECT_NEAR(logits[id], want, tol) << "prompt " << p["id"] << " token " << id;
      worst = std::max(worst, std::abs(logits[id] - want) / std::max(1.0f, std::abs(want)));
    }
    EXPECT_EQ(argmax(logits), p["last_logits_top5"][0][0].get<TokenId>());
    const auto want = p["greedy_32"].get<std::vector<TokenId>>();
    std::vector<TokenId> out;
    TokenId next = argmax(logits);
    while (out.size() < want.size()) {
      out.push_back(next);
      TokenId one[1] = {next};
      ASSERT_TRUE(b.Forward({ForwardSeq{&seq, one, 1}}, &logits).ok());
      next = argmax(logits);
    }
    EXPECT_EQ(out, want) << "prompt " << p["id"];
    b.kv_pool().Release(seq);
  }
  RecordProperty("worst_top5_relative_error", std::to_string(worst));
  std::printf("qwen2: worst top-5 logit error %.3g (relative to max(1, |logit|))\n", worst);
}

}  // namespace
}  // namespace specserve
