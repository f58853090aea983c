// spec/logprobs.h: the log-softmax and top-N of a logits row, and the
// logprobs the target session returns for each round's committed tokens
// (accepted drafts and the corrected / bonus token; greedy, sampled, K = 0),
// checked against a plain forward pass over the same sequence.
#include "spec/logprobs.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/local_engines.h"
#include "coordinator/round_loop.h"
#include "tests/test_models.h"
#include "tests/test_paths.h"

namespace specserve {
namespace {

std::vector<double> LogSoftmax(const std::vector<float>& row) {
  double max = -INFINITY;
  for (float v : row) max = std::max<double>(max, v);
  double sum = 0;
  for (float v : row) sum += std::exp(v - max);
  std::vector<double> out;
  for (float v : row) out.push_back(v - max - std::log(sum));
  return out;
}

std::vector<float> RandomRow(int32_t vocab, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> row(vocab);
  for (float& v : row) v = normal(gen);
  return row;
}

TEST(Logprobs, EqualsLogSoftmaxInDouble) {
  for (uint32_t seed = 0; seed < 5; ++seed) {
    const std::vector<float> row = RandomRow(5000, seed);
    const std::vector<double> want = LogSoftmax(row);
    for (TokenId t : {0, 17, 4999}) {
      auto got = TokenLogprobFromLogits(row, t, 20);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->id, t);
      EXPECT_NEAR(got->logprob, want[t], 1e-5);
      ASSERT_EQ(got->top.size(), 20u);
      for (const TopLogprob& a : got->top) EXPECT_NEAR(a.logprob, want[a.id], 1e-5);
    }
  }
}

TEST(Logprobs, LargeLogitsDoNotOverflow) {
  std::vector<float> row = {1000.0f, 999.0f, -1000.0f, -INFINITY};
  auto got = TokenLogprobFromLogits(row, 1, 4);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_NEAR(got->logprob, -1.0 - std::log1p(std::exp(-1.0)), 1e-6);
  ASSERT_EQ(got->top.size(), 4u);
  EXPECT_EQ(got->top[3].id, 3);
  EXPECT_TRUE(std::isinf(got->top[3].logprob));
}

TEST(Logprobs, TopNIsSortedWithTiesByLowerId) {
  std::vector<float> row = RandomRow(3000, 9);
  // Ties at the top and across the cut.
  for (TokenId id : {2500, 7, 1200}) row[id] = 30.0f;
  for (TokenId id : {2999, 40, 41, 1000}) row[id] = 25.0f;
  auto got = TokenLogprobFromLogits(row, 40, 5);
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<TokenId> ids;
  for (const TopLogprob& a : got->top) ids.push_back(a.id);
  EXPECT_EQ(ids, (std::vector<TokenId>{7, 1200, 2500, 40, 41}));
  // Against a full sort.
  for (int n : {0, 1, 3, 20}) {
    auto r = TokenLogprobFromLogits(row, 0, n);
    ASSERT_TRUE(r.ok());
    std::vector<TokenId> all(row.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<TokenId>(i);
    std::stable_sort(all.begin(), all.end(), [&](TokenId a, TokenId b) { return row[a] > row[b]; });
    ASSERT_EQ(static_cast<int>(r->top.size()), n);
    for (int i = 0; i < n; ++i) EXPECT_EQ(r->top[i].id, all[i]) << "rank " << i;
    for (int i = 1; i < n; ++i) EXPECT_GE(r->top[i - 1].logprob, r->top[i].logprob);
  }
}

TEST(Logprobs, BadInputsAreInvalidArgument) {
  const std::vector<float> row = {0.0f, 1.0f};
  EXPECT_EQ(TokenLogprobFromLogits({}, 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TokenLogprobFromLogits(row, 2, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TokenLogprobFromLogits(row, -1, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TokenLogprobFromLogits(row, 0, 21).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TokenLogprobFromLogits(row, 0, -1).status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<float> nan = {0.0f, NAN};
  EXPECT_EQ(TokenLogprobFromLogits(nan, 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<float> dead = {-INFINITY, -INFINITY};
  EXPECT_EQ(TokenLogprobFromLogits(dead, 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  // A top_n above the vocabulary returns the whole vocabulary.
  auto all = TokenLogprobFromLogits(row, 0, 5);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->top.size(), 2u);
}

TEST(Logprobs, RoundRowsScoreTheirTokens) {
  const int32_t vocab = 50;
  std::vector<float> logits;
  for (uint32_t r = 0; r < 3; ++r) {
    const std::vector<float> row = RandomRow(vocab, 100 + r);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  const std::vector<TokenId> tokens = {4, 9};  // d1 accepted, then x: rows 0 and 1
  auto got = RoundLogprobs(logits.data(), 3, vocab, tokens, 2);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::vector<float> row(logits.begin() + i * vocab, logits.begin() + (i + 1) * vocab);
    EXPECT_NEAR((*got)[i].logprob, LogSoftmax(row)[tokens[i]], 1e-5);
  }
  EXPECT_EQ(RoundLogprobs(logits.data(), 1, vocab, tokens, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

// The target session's logprobs for every committed token, through the
// round loop, equal the log-softmax of a plain forward pass over the
// committed sequence; under greedy decoding each token is its top-1.
struct Case {
  const char* name;
  float temperature;
  int k;  // 0: plain decoding (no drafter)
};

class SessionLogprobs : public ::testing::TestWithParam<Case> {};

TEST_P(SessionLogprobs, MatchPlainForwardPass) {
  const Case c = GetParam();
  testing::LoadedModel target = testing::LoadModel(testing::BundledModel("code-target-7m.gguf"));
  testing::LoadedModel draft = testing::LoadModel(testing::BundledModel("code-draft-1m.gguf"));
  ASSERT_TRUE(target.backend && draft.backend);
  SessionSpec spec;
  spec.prompt = {1, 433, 290, 597, 266, 300};
  spec.max_new_tokens = 40;
  spec.target.temperature = c.temperature;
  spec.target.seed = 11;
  spec.draft.temperature = c.temperature;
  spec.logprobs = true;
  spec.top_logprobs = 5;
  LocalVerifier verifier(*target.backend);
  LocalDrafter drafter(*draft.backend);
  LoopOptions opts;
  opts.k = KPolicy::Fixed(c.k);
  std::vector<TokenId> tokens;
  std::vector<TokenLogprob> lps;
  int64_t accepted = 0, corrected = 0;
  opts.on_logprobs = [&](absl::Span<const TokenLogprob> l) { lps.insert(lps.end(), l.begin(), l.end()); };
  opts.on_tokens = [&](absl::Span<const TokenId> t) {
    tokens.insert(tokens.end(), t.begin(), t.end());
    return true;
  };
  opts.on_round = [&](const RoundRecord& r) {
    accepted += r.accepted;
    corrected += r.accepted < r.drafted;
  };
  auto st = RunSpeculative(spec, c.k ? &drafter : nullptr, verifier, opts);
  ASSERT_TRUE(st.ok()) << st.status();
  ASSERT_EQ(lps.size(), tokens.size());
  ASSERT_EQ(static_cast<int>(tokens.size()), spec.max_new_tokens);
  if (c.k > 0) {
    EXPECT_GT(accepted, 0) << "no accepted draft token was checked";
    EXPECT_GT(corrected, 0) << "no corrected token was checked";
  }

  // Plain pass: feed prompt + tokens but the last, keep one row per generated token.
  std::vector<TokenId> full = spec.prompt;
  full.insert(full.end(), tokens.begin(), tokens.end() - 1);
  KvSeq seq;
  std::vector<float> logits;
  const int32_t n = static_cast<int32_t>(tokens.size());
  ASSERT_TRUE(target.backend->Forward({ForwardSeq{&seq, full, n}}, &logits).ok());
  target.backend->kv_pool().Release(seq);
  const int32_t vocab = target.backend->config().vocab;
  for (int32_t i = 0; i < n; ++i) {
    const std::vector<float> row(logits.begin() + static_cast<size_t>(i) * vocab,
                                 logits.begin() + static_cast<size_t>(i + 1) * vocab);
    const std::vector<double> want = LogSoftmax(row);
    EXPECT_EQ(lps[i].id, tokens[i]);
    EXPECT_NEAR(lps[i].logprob, want[tokens[i]], 1e-4) << c.name << " token " << i;
    ASSERT_EQ(lps[i].top.size(), 5u);
    for (const TopLogprob& a : lps[i].top) EXPECT_NEAR(a.logprob, want[a.id], 1e-4);
    if (c.temperature == 0) {
      EXPECT_EQ(lps[i].top[0].id, tokens[i]) << "greedy token " << i << " is not the top-1";
      EXPECT_EQ(lps[i].top[0].logprob, lps[i].logprob);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Rounds, SessionLogprobs,
                         ::testing::Values(Case{"greedy_k4", 0.0f, 4}, Case{"sampled_k3", 0.8f, 3},
                                           Case{"greedy_k0", 0.0f, 0}, Case{"sampled_k0", 1.0f, 0}),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace specserve
