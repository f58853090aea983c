// Unit tests for spec/verify.h: greedy rules, corner cases, input errors,
// reproducibility and equality with plain decoding across round splits.
// The distributional (slow) checks live in verify_stats_test.cc.
#include "spec/verify.h"

#include <cstdio>
#include <functional>
#include <vector>

#include "gtest/gtest.h"
#include "spec/rng.h"
#include "tests/stats.h"
#include "tests/verify_case.h"

namespace specserve {
namespace {

SparseDist OneHot(int32_t id) { return SparseDist{{id}, {1.0f}}; }

using testing::FromDense;

struct Case : testing::VerifyCase {
  Case() { first_position = 10; }
  VerifyResult Run() const {
    absl::StatusOr<VerifyResult> r = Verify(Input());
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : VerifyResult{-1, -1};
  }
};

// Rows whose argmax is argmaxes[i] (logit 5) over a background of i + j / 10.
Case GreedyCase(const std::vector<int32_t>& argmaxes, int32_t vocab) {
  Case c;
  c.vocab = vocab;
  for (size_t i = 0; i < argmaxes.size(); ++i) {
    for (int32_t j = 0; j < vocab; ++j) c.logits.push_back(j == argmaxes[i] ? 5.0f : j * 0.1f);
  }
  return c;
}

TEST(VerifyGreedy, AcceptsWhileDraftEqualsArgmax) {
  Case c = GreedyCase({2, 4, 1, 5}, 6);
  c.dists = {OneHot(0), OneHot(0), OneHot(0)};  // greedy never consults q
  c.tokens = {2, 4, 1};
  VerifyResult r = c.Run();
  EXPECT_EQ(r.accepted, 3);
  EXPECT_EQ(r.next_token, 5);  // bonus: argmax of row k
  c.tokens = {2, 3, 1};
  r = c.Run();
  EXPECT_EQ(r.accepted, 1);
  EXPECT_EQ(r.next_token, 4);  // argmax of the first mismatching row
  c.tokens = {0, 4, 1};
  r = c.Run();
  EXPECT_EQ(r.accepted, 0);
  EXPECT_EQ(r.next_token, 2);
}

TEST(VerifyGreedy, ArgmaxTiesGoToTheLowerId) {
  Case c;
  c.vocab = 4;
  c.logits = {1, 3, 3, 0, /*row 1*/ 0, 0, 0, 0};
  c.tokens = {2};
  c.dists = {OneHot(2)};
  EXPECT_EQ(c.Run().accepted, 0);
  EXPECT_EQ(c.Run().next_token, 1);
  c.tokens = {1};
  EXPECT_EQ(c.Run().accepted, 1);
  EXPECT_EQ(c.Run().next_token, 0);
}

TEST(VerifyK0, IsPlainDecoding) {
  Case c;
  c.vocab = 5;
  c.logits = {0.3f, 1.2f, -0.5f, 0.9f, 0.0f};
  EXPECT_EQ(c.Run().next_token, 1);  // greedy
  c.params = SamplingParams{.temperature = 1.0f, .top_k = 4};
  std::vector<int> seen(5, 0);
  for (uint64_t seed = 0; seed < 500; ++seed) {
    c.params.seed = seed;
    const VerifyResult r = c.Run();
    EXPECT_EQ(r.accepted, 0);
    EXPECT_EQ(r.next_token, SampleToken(c.logits.data(), 5, c.params, c.first_position));
    ++seen[r.next_token];
  }
  EXPECT_EQ(seen[2], 0);  // outside the top-4
  for (int t : {0, 1, 3, 4}) EXPECT_GT(seen[t], 0);
}

TEST(VerifySampled, DraftAbsentFromItsOwnQIsIgnoredAndPIsSampled) {
  Case c;
  c.vocab = 4;
  c.logits = {0, 2, 1, 0, /*row 1*/ 0, 0, 0, 0};
  c.tokens = {1};                    // the target's favourite, but not in q
  c.dists = {SparseDist{{0, 2}, {0.5f, 0.5f}}};
  std::vector<float> p;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    c.params = SamplingParams{.temperature = 1.0f, .seed = seed};
    TargetDistribution(c.logits.data(), 4, c.params, &p);
    const VerifyResult r = c.Run();
    EXPECT_EQ(r.accepted, 0);
    EXPECT_EQ(r.next_token,
              SampleFromProbs(p.data(), 4, UniformFloat(seed, 10, RngPurpose::kResample)));
  }
}

TEST(VerifySampled, TokenExcludedByTopKIsAlwaysRejected) {
  Case c;
  c.vocab = 5;
  c.logits = {3, 2, 1, 0, -1, /*row 1*/ 0, 0, 0, 0, 0};
  c.tokens = {3};  // 4th best: outside top-2
  c.dists = {SparseDist{{3, 0}, {0.9f, 0.1f}}};
  for (uint64_t seed = 0; seed < 1000; ++seed) {
    c.params = SamplingParams{.temperature = 1.0f, .top_k = 2, .seed = seed};
    const VerifyResult r = c.Run();
    EXPECT_EQ(r.accepted, 0);
    EXPECT_TRUE(r.next_token == 0 || r.next_token == 1) << r.next_token;
  }
}

TEST(AcceptDraftToken, BoundaryCases) {
  EXPECT_TRUE(AcceptDraftToken(0.3f, 0.3f, 0.99999994f));  // p == q always accepts
  EXPECT_TRUE(AcceptDraftToken(0.7f, 0.3f, 0.99999994f));
  EXPECT_FALSE(AcceptDraftToken(0.0f, 0.5f, 0.0f));        // p == 0 never accepts
  EXPECT_TRUE(AcceptDraftToken(0.25f, 0.5f, 0.49f));
  EXPECT_FALSE(AcceptDraftToken(0.25f, 0.5f, 0.5f));
}

TEST(ResidualSample, DrawsFromNormalisedPositivePart) {
  const float p[] = {0.1f, 0.4f, 0.3f, 0.2f};
  const SparseDist q{{2, 1}, {0.4f, 0.6f}};  // unsorted ids are fine
  // r = {0.1, 0, 0, 0.2} -> {1/3, 0, 0, 2/3}.
  EXPECT_EQ(ResidualSample(p, 4, q, 0.0f), 0);
  EXPECT_EQ(ResidualSample(p, 4, q, 0.33f), 0);
  EXPECT_EQ(ResidualSample(p, 4, q, 0.34f), 3);
  EXPECT_EQ(ResidualSample(p, 4, q, 0.99999994f), 3);
}

TEST(ResidualSample, WithoutMassFallsBackToP) {
  const std::vector<float> p = {0.25f, 0.0f, 0.5f, 0.25f};
  const SparseDist same = FromDense(p);
  const SparseDist wider{{0, 1, 2, 3}, {0.25f, 0.25f, 0.5f, 0.25f}};  // q >= p everywhere
  for (float u : {0.0f, 0.1f, 0.3f, 0.6f, 0.8f, 0.99999994f}) {
    EXPECT_EQ(ResidualSample(p.data(), 4, same, u), SampleFromProbs(p.data(), 4, u));
    EXPECT_EQ(ResidualSample(p.data(), 4, wider, u), SampleFromProbs(p.data(), 4, u));
  }
}

TEST(VerifySampled, DraftEqualToTargetIsAlwaysAccepted) {
  Case c;
  c.vocab = 6;
  c.params = SamplingParams{.temperature = 0.7f, .top_k = 5, .top_p = 0.9f};
  const int32_t k = 4;
  for (int32_t i = 0; i <= k; ++i) {
    for (int32_t j = 0; j < 6; ++j) c.logits.push_back(std::sin(1.0f + i * 6 + j));
  }
  std::vector<float> p;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    c.params.seed = seed;
    c.tokens.clear();
    c.dists.clear();
    for (int32_t i = 0; i < k; ++i) {
      TargetDistribution(c.logits.data() + i * 6, 6, c.params, &p);
      c.dists.push_back(FromDense(p));
      c.tokens.push_back(SampleSparse(c.dists.back(), UniformFloat(seed, 10 + i, 1u)));
    }
    EXPECT_EQ(c.Run().accepted, k);
  }
}

TEST(Verify, RejectsMalformedInput) {
  Case good = GreedyCase({1, 2, 3}, 4);
  good.tokens = {1, 2};
  good.dists = {OneHot(1), OneHot(2)};
  ASSERT_TRUE(Verify(good.Input()).ok());
  std::vector<std::function<void(Case&, VerifyInput&)>> breakers = {
      [](Case&, VerifyInput& in) { in.k = -1; },
      [](Case&, VerifyInput& in) { in.k = kMaxVerifyK + 1; },
      [](Case&, VerifyInput& in) { in.vocab = 0; },
      [](Case&, VerifyInput& in) { in.target_logits = nullptr; },
      [](Case&, VerifyInput& in) { in.draft_tokens = nullptr; },
      [](Case&, VerifyInput& in) { in.draft_dists = nullptr; },
      [](Case&, VerifyInput& in) { in.params.top_p = 0.0f; },
      [](Case&, VerifyInput& in) { in.params.temperature = -1.0f; },
      [](Case& c, VerifyInput&) { c.tokens[1] = 4; },
      [](Case& c, VerifyInput&) { c.tokens[0] = -1; },
      [](Case& c, VerifyInput&) { c.dists[0].probs.push_back(0.0f); },
      [](Case& c, VerifyInput&) { c.dists[1] = SparseDist{}; },
      [](Case& c, VerifyInput&) { c.dists[1] = SparseDist{{2, 7}, {0.5f, 0.5f}}; },
      [](Case& c, VerifyInput&) { c.dists[1] = SparseDist{{2, 1}, {1.5f, -0.5f}}; },
      [](Case& c, VerifyInput&) { c.dists[1] = SparseDist{{2, 2}, {0.5f, 0.5f}}; },
      [](Case& c, VerifyInput&) { c.dists[1] = SparseDist{{2, 1}, {0.5f, NAN}}; },
      [](Case& c, VerifyInput&) { c.dists[1] = SparseDist{{2, 1}, {0.5f, 0.2f}}; },
  };
  for (size_t b = 0; b < breakers.size(); ++b) {
    Case c = good;
    VerifyInput in = c.Input();
    breakers[b](c, in);
    absl::StatusOr<VerifyResult> r = Verify(in);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << "breaker " << b;
  }
  // k = 0 needs no draft arrays.
  Case k0 = GreedyCase({3}, 4);
  EXPECT_EQ(Verify(VerifyInput{k0.logits.data(), 4, 0, nullptr, nullptr, {}, 0})->next_token, 3);
}

// --- Whole-sequence simulations against a deterministic "model" ----------

constexpr int32_t kVocab = 16;

uint64_t Mix(uint64_t h) {  // splitmix64 finaliser
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

// The target's logits for the next token: a pure function of the prefix.
std::vector<float> TargetLogits(const std::vector<int32_t>& prefix) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : prefix) h = Mix(h ^ static_cast<uint64_t>(t + 1));
  std::vector<float> logits(kVocab);
  for (int32_t j = 0; j < kVocab; ++j) logits[j] = (Mix(h + j) % 1000) / 250.0f;
  return logits;
}

// The draft: the target's logits plus prefix-dependent noise, so it agrees often.
std::vector<float> DraftLogits(const std::vector<int32_t>& prefix) {
  std::vector<float> logits = TargetLogits(prefix);
  const uint64_t h = Mix(prefix.size() * 7919 + (prefix.empty() ? 0 : prefix.back()));
  for (int32_t j = 0; j < kVocab; ++j) logits[j] += (Mix(h + j) % 1000) / 8000.0f;
  return logits;
}

struct SpecRun {
  std::vector<int32_t> tokens;
  int64_t drafted = 0, accepted = 0;
};

// Rounds of propose / verify / commit as the coordinator runs them.
SpecRun Speculate(const std::vector<int32_t>& prompt, size_t n, const SamplingParams& params,
                  float draft_temperature, const std::function<int32_t(int)>& k_of_round) {
  SpecRun run;
  std::vector<int32_t> seq = prompt;
  for (int round = 0; seq.size() < prompt.size() + n; ++round) {
    const int32_t k = k_of_round(round);
    std::vector<int32_t> ctx = seq, drafted;
    std::vector<SparseDist> dists;
    for (int32_t i = 0; i < k; ++i) {
      const std::vector<float> dl = DraftLogits(ctx);
      dists.push_back(DraftDistribution(dl.data(), kVocab, draft_temperature, 8, 1.0f));
      drafted.push_back(SampleSparse(
          dists.back(), UniformFloat(params.seed, ctx.size(), RngPurpose::kDraftSample)));
      ctx.push_back(drafted.back());
    }
    std::vector<float> rows;  // row i: after seq + d_1..d_i
    for (int32_t i = 0; i <= k; ++i) {
      const std::vector<float> row =
          TargetLogits(std::vector<int32_t>(ctx.begin(), ctx.begin() + seq.size() + i));
      rows.insert(rows.end(), row.begin(), row.end());
    }
    absl::StatusOr<VerifyResult> r = Verify(VerifyInput{
        rows.data(), kVocab, k, drafted.data(), dists.data(), params, seq.size()});
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) break;
    seq.insert(seq.end(), drafted.begin(), drafted.begin() + r->accepted);
    seq.push_back(r->next_token);
    run.drafted += k;
    run.accepted += r->accepted;
  }
  run.tokens.assign(seq.begin() + prompt.size(), seq.begin() + prompt.size() + n);
  return run;
}

std::vector<int32_t> PlainDecode(const std::vector<int32_t>& prompt, size_t n,
                                 const SamplingParams& params) {
  std::vector<int32_t> seq = prompt;
  while (seq.size() < prompt.size() + n) {
    seq.push_back(SampleToken(TargetLogits(seq).data(), kVocab, params, seq.size()));
  }
  return std::vector<int32_t>(seq.begin() + prompt.size(), seq.end());
}

const std::vector<int32_t> kPrompt = {3, 1, 4, 1, 5};

TEST(VerifySequence, GreedyOutputIsPlainGreedyForEveryRoundSplit) {
  const SamplingParams greedy{};
  const std::vector<int32_t> plain = PlainDecode(kPrompt, 300, greedy);
  for (float draft_t : {0.0f, 0.1f}) {
    for (int32_t k : {1, 2, 4, 8}) {
      const SpecRun run = Speculate(kPrompt, 300, greedy, draft_t, [k](int) { return k; });
      EXPECT_EQ(run.tokens, plain) << "k " << k << " draft temperature " << draft_t;
      const double rate = static_cast<double>(run.accepted) / run.drafted;
      EXPECT_GT(rate, 0.1);  // both paths exercised
      EXPECT_LT(rate, 0.98);
      if (k == 4) std::printf("greedy k=4 draft_t=%.1f acceptance %.2f\n", draft_t, rate);
    }
    const SpecRun mixed = Speculate(kPrompt, 300, greedy, draft_t, [](int r) { return r % 6; });
    EXPECT_EQ(mixed.tokens, plain);
  }
}

TEST(VerifySequence, SampledK0RoundsArePlainDecoding) {
  const SamplingParams params{.temperature = 0.9f, .top_k = 12, .top_p = 0.95f, .seed = 77};
  EXPECT_EQ(Speculate(kPrompt, 200, params, 1.0f, [](int) { return 0; }).tokens,
            PlainDecode(kPrompt, 200, params));
}

TEST(VerifySequence, SampledOutputIsReproducibleForSeedAndSchedule) {
  SamplingParams params{.temperature = 1.0f, .seed = 5};
  auto schedule = [](int r) { return 1 + r % 5; };
  const SpecRun a = Speculate(kPrompt, 200, params, 1.0f, schedule);
  EXPECT_EQ(a.tokens, Speculate(kPrompt, 200, params, 1.0f, schedule).tokens);
  EXPECT_GT(a.accepted, 0);
  EXPECT_LT(a.accepted, a.drafted);
  params.seed = 6;
  EXPECT_NE(a.tokens, Speculate(kPrompt, 200, params, 1.0f, schedule).tokens);
}

}  // namespace
}  // namespace specserve
