// general.architecture = qwen2: q/k/v biases and rotate-half (NEOX) RoPE,
// against golden_qwen2.json (fp32 PyTorch; llama.cpp's qwen2 path gives the
// same continuations). The biases change 4 of the 8 continuations, so a
// forward pass that ignores them fails here.
#include <cstdio>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/backend.h"
#include "common/tokenizer.h"
#include "common/weights.h"
#include "tests/test_models.h"
#include "tests/test_paths.h"

namespace specserve {
namespace {

using nlohmann::json;

TEST(Qwen2Test, ConfigReadsQwen2Keys) {
  const std::string path = testing::SharedPath("models/variants/code-target-7m-qwen2.gguf");
  if (path.empty()) SPECSERVE_MISSING_INPUT("code-target-7m-qwen2.gguf");
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
  const json golden = testing::LoadJson(testing::SharedPath("golden/golden_qwen2.json"));
  if (golden.is_null()) SPECSERVE_MISSING_INPUT("../shared/golden/golden_qwen2.json");
  const std::string path =
      testing::SharedPath("models/variants/" + golden["file"].get<std::string>());
  if (path.empty()) SPECSERVE_MISSING_INPUT(golden["file"].get<std::string>());
  BackendOptions opts;
  opts.threads = 2;
  testing::LoadedModel l = testing::LoadModel(path, opts);
  ASSERT_TRUE(l.backend != nullptr);
  // The prompts' ids are the SentencePiece ones of golden.json.
  auto tok = Tokenizer::FromGguf(*l.model->file);
  ASSERT_TRUE(tok.ok()) << tok.status();
  testing::LogitError err;
  for (const json& p : golden["prompts"]) {
    const auto ids = p["ids"].get<std::vector<TokenId>>();
    ASSERT_NO_FATAL_FAILURE(testing::ExpectGoldenPrompt(*l.backend, ids, p, 1e-3f, /*check_argmax=*/true,
                                                        "prompt " + p["id"].dump(), &err));
  }
  const float worst = err.rel;
  RecordProperty("worst_top5_relative_error", std::to_string(worst));
  std::printf("qwen2: worst top-5 logit error %.3g (relative to max(1, |logit|))\n", worst);
}

}  // namespace
}  // namespace specserve
