#include "tests/test_models.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "backends/make_backend.h"
#include "tests/test_paths.h"

namespace specserve::testing {

using nlohmann::json;

json LoadJson(const std::string& path) {
  if (path.empty()) return json();
  std::ifstream in(path);
  return json::parse(in);
}

std::string ModelPath(const std::string& name) {
  const std::string bundled = BundledModel(name + ".gguf");
  if (std::ifstream(bundled).good()) return bundled;
  return SharedPath("models/" + name + ".gguf");
}

LoadedModel LoadModel(const std::string& path, const BackendOptions& opts) {
  LoadedModel l;
  auto m = Model::Load(path);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return l;
  l.model = std::move(*m);
  auto b = MakeBackend(*l.model, opts);
  EXPECT_TRUE(b.ok()) << b.status();
  if (b.ok()) l.backend = std::move(*b);
  return l;
}

std::string ModelParamName(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

int32_t ArgmaxRow(const float* row, int32_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

LogitError ExpectTop5Near(const std::vector<float>& logits, const json& top5, double abs_tol, double rel_tol,
                          const std::string& what) {
  LogitError worst;
  for (const json& kv : top5) {
    const int id = kv[0].get<int>();
    const float want = kv[1].get<float>();
    const float scale = std::max(1.0f, std::abs(want));
    EXPECT_NEAR(logits[id], want, abs_tol + rel_tol * scale) << what << " token " << id;
    const float err = std::abs(logits[id] - want);
    worst.abs = std::max(worst.abs, err);
    worst.rel = std::max(worst.rel, err / scale);
  }
  return worst;
}

absl::StatusOr<std::vector<TokenId>> GreedyContinuation(Backend& b, KvSeq& seq, std::vector<float>& logits,
                                                        size_t n) {
  const int32_t V = b.config().vocab;
  std::vector<TokenId> out;
  TokenId next = ArgmaxRow(logits.data(), V);
  while (out.size() < n) {
    out.push_back(next);
    TokenId one[1] = {next};
    absl::Status st = b.Forward({ForwardSeq{&seq, one, 1}}, &logits);
    if (!st.ok()) return st;
    next = ArgmaxRow(logits.data(), V);
  }
  return out;
}

void ExpectGoldenPrompt(Backend& b, const std::vector<TokenId>& ids, const json& ref, double rel_tol,
                        bool check_argmax, const std::string& what, LogitError* worst) {
  KvSeq seq;
  std::vector<float> logits;
  ASSERT_TRUE(b.Forward({ForwardSeq{&seq, ids, 1}}, &logits).ok());
  const LogitError err = ExpectTop5Near(logits, ref["last_logits_top5"], 0.0, rel_tol, what);
  if (worst) {
    worst->abs = std::max(worst->abs, err.abs);
    worst->rel = std::max(worst->rel, err.rel);
  }
  if (check_argmax) {
    EXPECT_EQ(ArgmaxRow(logits.data(), b.config().vocab), ref["last_logits_top5"][0][0].get<int>()) << what;
  }
  const auto want = ref["greedy_32"].get<std::vector<TokenId>>();
  auto out = GreedyContinuation(b, seq, logits, want.size());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, want) << what;
  b.kv_pool().Release(seq);
}

void ExpectMatchesGolden(const std::string& name, const BackendOptions& opts, double rel_tol) {
  const json golden = LoadJson(GoldenPath("golden.json"));
  if (golden.is_null()) SPECSERVE_MISSING_INPUT("../shared/golden/golden.json");
  const std::string path = ModelPath(name);
  if (path.empty()) SPECSERVE_MISSING_INPUT(name);
  LoadedModel l = LoadModel(path, opts);
  ASSERT_TRUE(l.backend != nullptr);
  Backend& b = *l.backend;
  for (const json& p : golden["prompts"]) {
    ASSERT_NO_FATAL_FAILURE(ExpectGoldenPrompt(b, p["ids"].get<std::vector<TokenId>>(), p["models"][name],
                                               rel_tol, /*check_argmax=*/true,
                                               absl::StrCat(name, " prompt ", p["id"].dump())));
  }
  EXPECT_EQ(b.kv_pool().used_blocks(), 0);
}

}  // namespace specserve::testing
