// Unit and statistical tests for spec/rng.h and spec/sampling.h.
#include "spec/sampling.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "spec/rng.h"
#include "tests/stats.h"

namespace specserve {
namespace {

using testing::ChiSquarePValue;
using testing::GammaQ;

std::vector<int32_t> Support(const std::vector<float>& probs) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] > 0.0f) ids.push_back(static_cast<int32_t>(i));
  }
  return ids;
}

TEST(StatsHelper, GammaQMatchesChiSquareTables) {
  EXPECT_NEAR(GammaQ(0.5, 3.841459 / 2), 0.05, 1e-6);   // dof 1
  EXPECT_NEAR(GammaQ(5.0, 23.20925 / 2), 0.01, 1e-6);   // dof 10
  EXPECT_NEAR(GammaQ(50.0, 124.3421 / 2), 0.05, 1e-6);  // dof 100 (continued fraction)
  EXPECT_NEAR(GammaQ(1.0, 2.0), std::exp(-2.0), 1e-12);  // dof 2: exp(-x/2)
}

TEST(Philox, Random123KnownAnswers) {
  struct Case { uint32_t ctr[4], key[2], want[4]; };
  const Case cases[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}, {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Case& c : cases) {
    uint32_t out[4];
    Philox4x32_10(c.ctr, c.key, out);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], c.want[i]) << "word " << i;
  }
}

TEST(Philox, UniformFloatIsOnThe24BitGridAndKeyedByEveryArgument) {
  const float u = UniformFloat(7, 100, RngPurpose::kAccept);
  EXPECT_GE(u, 0.0f);
  EXPECT_LT(u, 1.0f);
  EXPECT_EQ(u * 16777216.0f, std::floor(u * 16777216.0f));
  EXPECT_EQ(u, static_cast<float>(RandomBits(7, 100, 2) >> 8) / 16777216.0f);
  EXPECT_NE(u, UniformFloat(8, 100, RngPurpose::kAccept));
  EXPECT_NE(u, UniformFloat(7, 101, RngPurpose::kAccept));
  EXPECT_NE(u, UniformFloat(7, 100, RngPurpose::kResample));
  EXPECT_NE(UniformFloat(7, 1, 2), UniformFloat(7, 1ull << 32 | 1, 2));  // high position word
  // Mean and range over many draws.
  double sum = 0.0;
  for (uint64_t pos = 0; pos < 100000; ++pos) sum += UniformFloat(1, pos, 3u);
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);
}

TEST(Argmax, LowestIndexWinsTiesAndNaNNeverWins) {
  const float a[] = {1.0f, 3.0f, -2.0f, 3.0f, 3.0f};
  EXPECT_EQ(Argmax(a, 5), 1);
  const float b[] = {NAN, -1.0f, NAN, 0.5f, 0.5f};
  EXPECT_EQ(Argmax(b, 5), 3);
  const float c[] = {-INFINITY, -INFINITY};
  EXPECT_EQ(Argmax(c, 2), 0);
}

TEST(Validate, RejectsOutOfRangeParameters) {
  EXPECT_TRUE(Validate(SamplingParams{}).ok());
  EXPECT_TRUE(Validate(SamplingParams{.temperature = 0.7f, .top_k = 40, .top_p = 0.9f}).ok());
  for (SamplingParams bad : {SamplingParams{.temperature = -0.1f},
                             SamplingParams{.temperature = NAN},
                             SamplingParams{.temperature = INFINITY},
                             SamplingParams{.top_k = -1}, SamplingParams{.top_p = 0.0f},
                             SamplingParams{.top_p = 1.01f}, SamplingParams{.top_p = NAN}}) {
    const absl::Status s = Validate(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
}

TEST(TargetDistribution, GreedyIsOneHotAtTheLowestArgmax) {
  const float logits[] = {0.0f, 2.0f, 2.0f, 1.0f};
  std::vector<float> p;
  TargetDistribution(logits, 4, SamplingParams{.temperature = 0.0f, .top_k = 3}, &p);
  EXPECT_EQ(p, (std::vector<float>{0, 1, 0, 0}));
}

TEST(TargetDistribution, TemperatureScalesTheSoftmax) {
  const float logits[] = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f};
  for (float t : {0.5f, 1.0f, 1.5f}) {
    std::vector<float> p;
    TargetDistribution(logits, 5, SamplingParams{.temperature = t}, &p);
    double z = 0.0;
    for (float l : logits) z += std::exp(l / t);
    for (int i = 0; i < 5; ++i) EXPECT_NEAR(p[i], std::exp(logits[i] / t) / z, 1e-6) << t;
  }
}

TEST(TargetDistribution, TopKKeepsTheLowerIdAmongBoundaryTies) {
  const float logits[] = {1.0f, 3.0f, 3.0f, 2.0f, 3.0f, 0.0f};
  std::vector<float> p;
  TargetDistribution(logits, 6, SamplingParams{.temperature = 1.0f, .top_k = 2}, &p);
  EXPECT_EQ(Support(p), (std::vector<int32_t>{1, 2}));
  EXPECT_FLOAT_EQ(p[1], 0.5f);
  TargetDistribution(logits, 6, SamplingParams{.temperature = 1.0f, .top_k = 4}, &p);
  EXPECT_EQ(Support(p), (std::vector<int32_t>{1, 2, 3, 4}));
  TargetDistribution(logits, 6, SamplingParams{.temperature = 1.0f, .top_k = 6}, &p);  // off
  EXPECT_EQ(Support(p).size(), 6u);
}

TEST(TargetDistribution, TopPKeepsTheSmallestPrefixReachingTheMass) {
  // Softmax of log(w) is w: masses 0.4, 0.3, 0.2, 0.1 at ids 2, 0, 3, 1.
  const float logits[] = {std::log(0.3f), std::log(0.1f), std::log(0.4f), std::log(0.2f)};
  std::vector<float> p;
  auto kept = [&](float top_p, int32_t top_k) {
    TargetDistribution(logits, 4, SamplingParams{.temperature = 1.0f, .top_k = top_k,
                                                 .top_p = top_p}, &p);
    return Support(p);
  };
  EXPECT_EQ(kept(0.05f, 0), (std::vector<int32_t>{2}));  // always at least one
  EXPECT_EQ(kept(0.65f, 0), (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(kept(0.75f, 0), (std::vector<int32_t>{0, 2, 3}));
  EXPECT_NEAR(p[2], 0.4 / 0.9, 1e-6);
  EXPECT_NEAR(p[3], 0.2 / 0.9, 1e-6);
  EXPECT_EQ(kept(0.95f, 0), (std::vector<int32_t>{0, 1, 2, 3}));
  // top-p applies to the top-k-renormalised masses: top-2 = {0.4, 0.3} / 0.7,
  // so 0.4 / 0.7 = 0.571 already reaches 0.55, and 0.6 needs both.
  EXPECT_EQ(kept(0.55f, 2), (std::vector<int32_t>{2}));
  EXPECT_EQ(kept(0.6f, 2), (std::vector<int32_t>{0, 2}));
  // Equal masses: the lower id comes first.
  const float flat[] = {0.0f, 0.0f, 0.0f, 0.0f};
  TargetDistribution(flat, 4, SamplingParams{.temperature = 1.0f, .top_p = 0.5f}, &p);
  EXPECT_EQ(Support(p), (std::vector<int32_t>{0, 1}));
}

TEST(TargetDistribution, LargeVocabularyTopPMatchesAFullSort) {
  const int32_t vocab = 128 * 1024;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(vocab);
  for (float& l : logits) l = normal(rng);
  const SamplingParams params{.temperature = 0.8f, .top_p = 0.9f};
  std::vector<float> p;
  for (const SamplingParams& rule : {SamplingParams{.temperature = 0.8f}, params,
                                     SamplingParams{.temperature = 0.8f, .top_k = 50}}) {
    double ms = 1e9;  // best of 5 (the machine is shared)
    for (int rep = 0; rep < 5; ++rep) {
      const auto start = std::chrono::steady_clock::now();
      TargetDistribution(logits.data(), vocab, rule, &p);
      ms = std::min(ms, std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - start).count());
    }
    std::printf("TargetDistribution vocab %d top_k %d top_p %.1f: %.2f ms, %zu kept\n", vocab,
                rule.top_k, rule.top_p, ms, Support(p).size());
  }
  TargetDistribution(logits.data(), vocab, params, &p);
  // Reference: the dense softmax, fully sorted.
  std::vector<float> dense;
  TargetDistribution(logits.data(), vocab, SamplingParams{.temperature = 0.8f}, &dense);
  std::vector<int32_t> order(vocab);
  for (int32_t i = 0; i < vocab; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  double cum = 0.0;
  size_t keep = 0;
  while (cum < 0.9) cum += dense[order[keep++]];
  EXPECT_EQ(Support(p).size(), keep);
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    EXPECT_GT(p[order[i]], 0.0f);
    total += p[order[i]];
  }
  EXPECT_NEAR(total, 1.0, 1e-5);
}

TEST(TargetDistribution, NonFiniteLogitsStillGiveADistribution) {
  const float logits[] = {NAN, -INFINITY, 1.0f, 1.0f};
  std::vector<float> p;
  TargetDistribution(logits, 4, SamplingParams{.temperature = 1.0f}, &p);
  EXPECT_EQ(p, (std::vector<float>{0.0f, 0.0f, 0.5f, 0.5f}));
}

TEST(SampleFromProbs, InverseCdfOverAscendingIds) {
  const float probs[] = {0.25f, 0.0f, 0.5f, 0.25f, 0.0f};
  EXPECT_EQ(SampleFromProbs(probs, 5, 0.0f), 0);
  EXPECT_EQ(SampleFromProbs(probs, 5, 0.2499f), 0);
  EXPECT_EQ(SampleFromProbs(probs, 5, 0.25f), 2);
  EXPECT_EQ(SampleFromProbs(probs, 5, 0.75f), 3);
  EXPECT_EQ(SampleFromProbs(probs, 5, 0.99999994f), 3);  // never the trailing zero
  const float unnormalised[] = {2.0f, 0.0f, 6.0f};    // treated as weights
  EXPECT_EQ(SampleFromProbs(unnormalised, 3, 0.24f), 0);
  EXPECT_EQ(SampleFromProbs(unnormalised, 3, 0.26f), 2);
  const float none[] = {0.0f, 0.0f};
  EXPECT_EQ(SampleFromProbs(none, 2, 0.5f), -1);
}

TEST(SampleToken, ReproducibleForSeedAndPosition) {
  const float logits[] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
  const SamplingParams params{.temperature = 1.0f, .seed = 42};
  std::set<int32_t> seen;
  for (uint64_t pos = 0; pos < 200; ++pos) {
    const int32_t a = SampleToken(logits, 8, params, pos);
    EXPECT_EQ(a, SampleToken(logits, 8, params, pos));
    Sampler sampler(params);
    EXPECT_EQ(a, sampler.Sample(logits, 8, pos));
    seen.insert(a);
  }
  EXPECT_EQ(seen.size(), 8u);  // the position changes the draw
  EXPECT_EQ(SampleToken(logits, 8, SamplingParams{}, 3), 7);  // greedy
}

TEST(SampleToken, EmpiricalFrequenciesMatchTargetDistribution) {
  const float logits[] = {1.0f, 0.5f, 2.0f, -1.0f, 0.0f, 1.5f, 1.5f, -3.0f, 0.2f, 2.2f};
  const SamplingParams rules[] = {
      {.temperature = 1.0f, .seed = 1},
      {.temperature = 0.5f, .top_k = 5, .seed = 2},
      {.temperature = 1.5f, .top_k = 8, .top_p = 0.8f, .seed = 3},
  };
  constexpr int kSamples = 200000;
  for (const SamplingParams& params : rules) {
    std::vector<float> p;
    TargetDistribution(logits, 10, params, &p);
    std::vector<int64_t> counts(10, 0);
    Sampler sampler(params);
    for (uint64_t pos = 0; pos < kSamples; ++pos) ++counts[sampler.Sample(logits, 10, pos)];
    for (int i = 0; i < 10; ++i) {
      if (p[i] == 0.0f) {
        EXPECT_EQ(counts[i], 0) << "excluded token " << i << " sampled";
      }
    }
    EXPECT_GT(ChiSquarePValue(counts, p), 1e-4) << "temperature " << params.temperature;
    // Test of the test: the same counts against a slightly wrong rule fail.
    std::vector<float> wrong;
    SamplingParams off = params;
    off.temperature *= 1.1f;
    TargetDistribution(logits, 10, off, &wrong);
    EXPECT_LT(ChiSquarePValue(counts, wrong), 1e-6);
  }
}

TEST(DraftDistribution, TruncatesToTopNAndRenormalises) {
  const float logits[] = {0.5f, 3.0f, 1.0f, 2.0f, 2.0f, -1.0f};
  const SparseDist q = DraftDistribution(logits, 6, 1.0f, 3, 1.0f);
  EXPECT_EQ(q.ids, (std::vector<int32_t>{1, 3, 4}));  // 3 and 4 tie: lower id first
  const double z = std::exp(3.0) + 2 * std::exp(2.0);
  EXPECT_NEAR(q.probs[0], std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(q.probs[1], std::exp(2.0) / z, 1e-6);
  EXPECT_EQ(q.probs[1], q.probs[2]);
  // Its own top-p inside the top-N: 0.576 < 0.6 <= 0.788.
  const SparseDist q2 = DraftDistribution(logits, 6, 1.0f, 3, 0.6f);
  EXPECT_EQ(q2.ids, (std::vector<int32_t>{1, 3}));
  EXPECT_NEAR(q2.probs[0] + q2.probs[1], 1.0f, 1e-6);
  EXPECT_NEAR(q2.probs[0], std::exp(3.0) / (std::exp(3.0) + std::exp(2.0)), 1e-6);
  // Greedy, and top_n beyond the vocabulary.
  const SparseDist g = DraftDistribution(logits, 6, 0.0f, 64, 1.0f);
  EXPECT_EQ(g.ids, (std::vector<int32_t>{1}));
  EXPECT_EQ(g.probs, (std::vector<float>{1.0f}));
  EXPECT_EQ(DraftDistribution(logits, 6, 2.0f, 64, 1.0f).ids.size(), 6u);
  // Temperature.
  const SparseDist hot = DraftDistribution(logits, 6, 2.0f, 2, 1.0f);
  EXPECT_NEAR(hot.probs[0], 1.0 / (1.0 + std::exp(-0.5)), 1e-6);
}

TEST(DraftDistribution, SampleSparseFollowsTheDistribution) {
  std::vector<float> logits(40);
  for (int i = 0; i < 40; ++i) logits[i] = std::sin(i * 1.7f) * 2.0f;
  const SparseDist q = DraftDistribution(logits.data(), 40, 0.9f, 12, 0.95f);
  std::vector<float> dense(40, 0.0f);
  for (size_t j = 0; j < q.ids.size(); ++j) dense[q.ids[j]] = q.probs[j];
  std::vector<int64_t> counts(40, 0);
  for (uint64_t pos = 0; pos < 200000; ++pos) {
    ++counts[SampleSparse(q, UniformFloat(9, pos, RngPurpose::kDraftSample))];
  }
  for (int i = 0; i < 40; ++i) {
    if (dense[i] == 0.0f) {
      EXPECT_EQ(counts[i], 0);
    }
  }
  EXPECT_GT(ChiSquarePValue(counts, dense), 1e-4);
  EXPECT_EQ(SampleSparse(SparseDist{}, 0.5f), -1);
}

}  // namespace
}  // namespace specserve
