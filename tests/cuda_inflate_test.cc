// tools/inflate.h: an inflated model computes the small model's function.
// Runs on the CPU backend (no GPU needed) with shapes a few times wider; the
// GPU benchmark (tests/cuda_bench_test.cc) inflates to the 8B and 1B shapes.
#include "tools/inflate.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/make_backend.h"
#include "common/backend.h"
#include "tests/test_paths.h"

namespace specserve {
namespace {

std::string ModelPath(const std::string& name) {
  std::string bundled = testing::BundledModel(name + ".gguf");
  if (std::ifstream(bundled).good()) return bundled;
  return testing::SharedPath("models/" + name + ".gguf");
}

std::vector<float> AllLogits(const Model& m, const std::vector<TokenId>& ids) {
  BackendOptions opts;
  opts.threads = 2;
  auto b = MakeCpuBackend(m, opts);
  EXPECT_TRUE(b.ok()) << b.status();
  KvSeq seq;
  std::vector<float> logits;
  EXPECT_TRUE((*b)->Forward({ForwardSeq{&seq, ids, static_cast<int32_t>(ids.size())}}, &logits).ok());
  (*b)->kv_pool().Release(seq);
  return logits;
}

struct Case {
  const char* model;
  inflate::Shape shape;
};

class InflateTest : public ::testing::TestWithParam<Case> {};

TEST_P(InflateTest, SameLogitsAsTheSmallModel) {
  const std::string path = ModelPath(GetParam().model);
  if (path.empty()) GTEST_SKIP() << GetParam().model << " not present";
  auto small = Model::Load(path);
  ASSERT_TRUE(small.ok()) << small.status();
  auto big = inflate::Inflate(**small, GetParam().shape, 7);
  ASSERT_TRUE(big.ok()) << big.status();
  const ModelConfig& c = (*big)->model.config;
  EXPECT_EQ(c.n_embd, GetParam().shape.n_embd);
  EXPECT_EQ(c.n_layer, GetParam().shape.n_layer);
  std::vector<TokenId> ids = {1};
  for (int i = 1; i < 48; ++i) ids.push_back(100 + (i * 37) % 3000);
  const std::vector<float> want = AllLogits(**small, ids), got = AllLogits((*big)->model, ids);
  ASSERT_EQ(got.size(), want.size());
  const int32_t V = (*small)->config.vocab;
  double max_err = 0.0;
  int argmax_agree = 0;
  for (size_t r = 0; r < ids.size(); ++r) {
    const float* g = got.data() + r * V;
    const float* w = want.data() + r * V;
    for (int32_t v = 0; v < V; ++v) max_err = std::max(max_err, std::abs(double(g[v]) - w[v]));
    argmax_agree += std::max_element(g, g + V) - g == std::max_element(w, w + V) - w;
  }
  std::printf("%s -> %dx%d: max |logit error| %.4f, argmax agrees on %d of %zu rows\n", GetParam().model,
              c.n_embd, c.n_layer, max_err, argmax_agree, ids.size());
  EXPECT_LT(max_err, 0.05);  // the f16 rounding of the rotated weights
  EXPECT_GE(argmax_agree, static_cast<int>(ids.size()) - 1);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, InflateTest,
    ::testing::Values(Case{"code-draft-1m", {256, 6, 8, 4, 512}}, Case{"code-target-7m", {512, 8, 16, 4, 1024}}),
    [](const auto& info) {
      std::string s = info.param.model;
      std::replace(s.begin(), s.end(), '-', '_');
      return s;
    });

TEST(Inflate, RefusesShapesThatDoNotContainTheModel) {
  const std::string path = ModelPath("code-draft-1m");
  if (path.empty()) GTEST_SKIP() << "code-draft-1m not present";
  auto small = Model::Load(path);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(inflate::Inflate(**small, {192, 6, 8, 4, 512}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(inflate::Inflate(**small, {256, 2, 8, 4, 512}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(inflate::Inflate(**small, {256, 6, 6, 4, 512}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace specserve
