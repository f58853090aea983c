// The forward pass against golden.json (fp32 on the same weights, checked by
// an independent implementation), plus ragged batching and rollback.
#include <algorithm>

#include <gtest/gtest.h>

#include "backends/make_backend.h"
#include "common/backend.h"
#include "common/weights.h"
#include "tests/test_models.h"
#include "tests/test_paths.h"

namespace specserve {
namespace {

using testing::LoadedModel;

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, TopLogitsAndGreedyContinuation) {
  BackendOptions opts;
  opts.threads = 2;
  testing::ExpectMatchesGolden(GetParam(), opts, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenTest,
                         ::testing::Values("code-draft-1m", "code-target-7m", "code-target-14m"),
                         testing::ModelParamName);

LoadedModel LoadTarget(int threads = 1) {
  BackendOptions o;
  o.threads = threads;
  return testing::LoadModel(testing::BundledModel("code-target-7m.gguf"), o);
}

std::vector<TokenId> Prompt(int n, int salt) {
  std::vector<TokenId> ids{1};
  for (int i = 1; i < n; ++i) ids.push_back(100 + (i * 37 + salt * 101) % 3000);
  return ids;
}

TEST(ForwardTest, RaggedBatchMatchesEachAlone) {
  LoadedModel l = LoadTarget(2);
  const int32_t V = l.model->config.vocab;
  std::vector<std::vector<TokenId>> prompts = {Prompt(7, 1), Prompt(30, 2), Prompt(1, 3), Prompt(13, 4)};
  // Alone: all positions' logits of each prompt.
  std::vector<std::vector<float>> alone;
  for (auto& p : prompts) {
    KvSeq s;
    std::vector<float> lg;
    ASSERT_TRUE(l.backend->Forward({ForwardSeq{&s, p, static_cast<int32_t>(p.size())}}, &lg).ok());
    alone.push_back(lg);
    l.backend->kv_pool().Release(s);
  }
  // Together, with a second step where sequences sit at different depths.
  std::vector<KvSeq> seqs(prompts.size());
  std::vector<ForwardSeq> batch;
  for (size_t i = 0; i < prompts.size(); ++i) {
    batch.push_back({&seqs[i], prompts[i], static_cast<int32_t>(prompts[i].size())});
  }
  std::vector<float> lg;
  ASSERT_TRUE(l.backend->Forward(batch, &lg).ok());
  size_t row = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    for (size_t j = 0; j < prompts[i].size(); ++j, ++row) {
      for (int v = 0; v < V; v += 97) {
        ASSERT_NEAR(lg[row * V + v], alone[i][j * V + v], 1e-4) << "seq " << i << " pos " << j;
      }
    }
  }
  for (auto& s : seqs) l.backend->kv_pool().Release(s);
  EXPECT_EQ(l.backend->kv_pool().used_blocks(), 0);
}

// Batch invariance: a verify pass of T tokens gives each position the same
// logits, bit for bit, as decoding them one at a time. Greedy speculative
// output then equals plain greedy output even where two logits nearly tie.
// For the f32 model and its Q8_0 and Q4_K_M (Q4_K, Q5_0, Q6_K, Q8_0) files,
// with fp32 activations and, for the quantized files, int8 ones.
struct InvarianceCase {
  std::string file;
  MatMulActivations activations;
  friend void PrintTo(const InvarianceCase& c, std::ostream* os) {
    *os << c.file << ", " << MatMulActivationsName(c.activations) << " activations";
  }
};

class BatchInvarianceTest : public ::testing::TestWithParam<InvarianceCase> {};

TEST_P(BatchInvarianceTest, VerifyPassLogitsHaveTheBitsOfOneTokenDecoding) {
  const std::string& file = GetParam().file;
  const std::string path = file == "code-target-7m.gguf" ? testing::BundledModel(file)
                                                         : testing::SharedPath("models/variants/" + file);
  if (path.empty()) SPECSERVE_MISSING_INPUT(file);
  for (int threads : {1, 2}) {
    BackendOptions o;
    o.threads = threads;
    o.cpu_activations = GetParam().activations;
    LoadedModel l = testing::LoadModel(path, o);
    const int32_t V = l.model->config.vocab;
    const std::vector<TokenId> tokens = Prompt(80, 5);
    constexpr int kPrompt = 37;
    KvSeq one;
    std::vector<float> lg, want;
    ASSERT_TRUE(l.backend->Forward({ForwardSeq{&one, {tokens.data(), kPrompt}, 1}}, &lg).ok());
    for (int i = kPrompt; i < 80; ++i) {
      ASSERT_TRUE(l.backend->Forward({ForwardSeq{&one, {&tokens[i], 1}, 1}}, &lg).ok());
      want.insert(want.end(), lg.begin(), lg.end());
    }
    // The same 43 tokens in passes of 2, 3, 4, 5, 6, 7, 9 and 7 tokens.
    KvSeq many;
    ASSERT_TRUE(l.backend->Forward({ForwardSeq{&many, {tokens.data(), kPrompt}, 1}}, &lg).ok());
    int pos = kPrompt;
    for (int T : {2, 3, 4, 5, 6, 7, 9, 7}) {
      ASSERT_TRUE(l.backend->Forward({ForwardSeq{&many, {&tokens[pos], static_cast<size_t>(T)}, T}}, &lg).ok());
      for (int64_t i = 0; i < int64_t{T} * V; ++i) {
        ASSERT_EQ(lg[i], want[(pos - kPrompt) * int64_t{V} + i])
            << "threads " << threads << ", pass of " << T << " at position " << pos + i / V;
      }
      pos += T;
    }
    ASSERT_EQ(pos, 80);
    for (KvSeq* k : {&one, &many}) l.backend->kv_pool().Release(*k);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, BatchInvarianceTest,
    ::testing::Values(InvarianceCase{"code-target-7m.gguf", MatMulActivations::kFp32},
                      InvarianceCase{"code-target-7m-q8_0.gguf", MatMulActivations::kFp32},
                      InvarianceCase{"code-target-7m-q4_k_m.gguf", MatMulActivations::kFp32},
                      InvarianceCase{"code-target-7m-q8_0.gguf", MatMulActivations::kInt8},
                      InvarianceCase{"code-target-7m-q4_k_m.gguf", MatMulActivations::kInt8}),
    [](const auto& info) {
      std::string s = info.param.file.substr(0, info.param.file.size() - 5);
      std::replace(s.begin(), s.end(), '-', '_');
      std::replace(s.begin(), s.end(), '.', '_');
      return s + "_" + MatMulActivationsName(info.param.activations);
    });

TEST(ForwardTest, TruncateIsAnExactRollback) {
  LoadedModel l = LoadTarget(1);
  const int32_t V = l.model->config.vocab;
  const std::vector<TokenId> tokens = Prompt(60, 9);
  // Decode tokens one at a time from position `from` to `to`, returning the
  // logits after each step: [to - from, V].
  auto decode = [&](KvSeq& s, int from, int to) {
    std::vector<float> all, lg;
    for (int i = from; i < to; ++i) {
      EXPECT_TRUE(l.backend->Forward({ForwardSeq{&s, {&tokens[i], 1}, 1}}, &lg).ok());
      all.insert(all.end(), lg.begin(), lg.end());
    }
    return all;
  };
  // Reference: a run that never goes past position 30.
  KvSeq ref;
  decode(ref, 0, 20);
  const std::vector<float> want = decode(ref, 20, 30);
  // Decode 40 tokens with different content past position 20, roll back to 20, redo.
  KvSeq s;
  decode(s, 0, 20);
  std::vector<TokenId> detour(20, 777);
  std::vector<float> lg;
  ASSERT_TRUE(l.backend->Forward({ForwardSeq{&s, detour, 1}}, &lg).ok());
  EXPECT_EQ(s.length, 40);
  EXPECT_EQ(s.blocks.size(), 3u);
  l.backend->kv_pool().Truncate(s, 20);
  EXPECT_EQ(s.length, 20);
  EXPECT_EQ(s.blocks.size(), 2u);  // blocks past the committed length went back
  const std::vector<float> got = decode(s, 20, 30);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "row " << i / V;
  for (KvSeq* k : {&ref, &s}) l.backend->kv_pool().Release(*k);
  EXPECT_EQ(l.backend->kv_pool().used_blocks(), 0);
}

TEST(ForwardTest, BadInputIsRefusedAndNothingChanges) {
  LoadedModel l = LoadTarget(1);
  KvSeq s;
  std::vector<float> lg;
  std::vector<TokenId> bad = {1, 5, 99999};
  absl::Status st = l.backend->Forward({ForwardSeq{&s, bad, 1}}, &lg);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("99999"), std::string::npos);
  std::vector<TokenId> neg = {1, -1};
  EXPECT_EQ(l.backend->Forward({ForwardSeq{&s, neg, 1}}, &lg).code(), absl::StatusCode::kInvalidArgument);
  std::vector<TokenId> huge(l.model->config.n_ctx + 1, 5);
  EXPECT_EQ(l.backend->Forward({ForwardSeq{&s, huge, 1}}, &lg).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.length, 0);
  EXPECT_EQ(l.backend->kv_pool().used_blocks(), 0);
}

TEST(ForwardTest, FullPoolIsResourceExhausted) {
  auto m = Model::Load(testing::BundledModel("code-target-7m.gguf"));
  ASSERT_TRUE(m.ok());
  BackendOptions o;
  o.kv_blocks = 4;
  o.kv_block_size = 16;
  auto b = MakeCpuBackend(**m, o);
  ASSERT_TRUE(b.ok());
  KvSeq a, c;
  std::vector<float> lg;
  std::vector<TokenId> p = Prompt(40, 1);  // 3 blocks
  ASSERT_TRUE((*b)->Forward({ForwardSeq{&a, p, 1}}, &lg).ok());
  absl::Status st = (*b)->Forward({ForwardSeq{&c, p, 1}}, &lg);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_EQ(c.length, 0);
  EXPECT_TRUE(c.blocks.empty());
  (*b)->kv_pool().Release(a);
  EXPECT_EQ((*b)->kv_pool().used_blocks(), 0);
  ASSERT_TRUE((*b)->Forward({ForwardSeq{&c, p, 1}}, &lg).ok());
  (*b)->kv_pool().Release(c);
}

}  // namespace
}  // namespace specserve
