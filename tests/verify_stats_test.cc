// Statistical tests of Verify (slow: ~200k simulated rounds per config).
//
// Claim under test (Leviathan et al. 2023, Theorem 1; Chen et al. 2023): for
// any draft distributions q_i, every emitted token is distributed as the
// target's p given the prefix, and d_1 is accepted with probability
// sum_x min(p_0(x), q_1(x)).
//
// Harness: a config fixes vocab, K, the target's rule, target logits rows
// 0..K and draft distributions q_1..q_K, independent of the drafted tokens.
// That is a valid special case: the theorem holds position by position for
// any p and q the prefix may select, so fixed ones are one choice of them.
// Each trial draws d_i ~ q_i (Philox, kDraftSample), runs the verifier, and
// sees t_1..t_{n+1} = d_1..d_n, x. Then:
//   - position j (1..K+1), over trials that emitted it (n + 1 >= j): t_j ~ p_{j-1}.
//     Whether position j is emitted depends only on earlier positions' draws,
//     so the conditioning is fair; j = K+1 is the bonus.
//   - the round completed with plain target draws to length K+1 is i.i.d.
//     p_0 x p_1 x ...; (t_1, t_2) is checked jointly (catches correlation
//     between the accept/residual draws of one position and the next).
//   - acceptance of d_1 matches 1 - TV(p_0, q_1) (catches a verifier that is
//     exact but wastes drafts, e.g. one that always rejects).
//   - a token with p = 0 is never emitted.
// Chi-square p-values (cells pooled to expected >= 5) must exceed 1e-4; the
// seeds are fixed, so the outcome is deterministic. Each trial uses its own
// seed, since draws are keyed by (seed, position, purpose).
//
// Test of the test: the same harness must reject deliberately broken
// verifiers (resampling from p instead of the residual, reusing the accept
// draw for the residual, bonus from the wrong row, ignoring top-k, never
// accepting).
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "spec/rng.h"
#include "spec/sampling.h"
#include "spec/verify.h"
#include "tests/stats.h"

namespace specserve {
namespace {

using testing::FromDense;
using testing::GammaQ;
using testing::PooledChiSquarePValue;

struct Config {
  std::string name;
  int32_t vocab = 0, k = 0;
  SamplingParams params;
  std::vector<float> logits;            // [k + 1, vocab]
  std::vector<SparseDist> q;            // [k]
  std::vector<std::vector<float>> p;    // [k + 1][vocab]: TargetDistribution of each row
};

void FinishConfig(Config* c) {
  c->p.resize(c->k + 1);
  for (int32_t i = 0; i <= c->k; ++i) {
    TargetDistribution(c->logits.data() + static_cast<size_t>(i) * c->vocab, c->vocab, c->params,
                       &c->p[i]);
  }
}

// A random config. Draft kinds rotate: a truncated draft of noisy target
// logits (DraftDistribution), one-hot, a random sparse subset, q == p exactly,
// and a greedy draft.
Config RandomConfig(int index) {
  std::mt19937_64 rng(1000 + index);
  auto uniform_int = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  std::normal_distribution<float> normal(0.0f, 1.5f);
  Config c;
  c.vocab = uniform_int(5, 50);
  c.k = uniform_int(1, 8);
  c.params.temperature = std::array<float, 3>{0.5f, 1.0f, 1.5f}[index % 3];
  if (index % 3 == 1) c.params.top_k = uniform_int(2, c.vocab - 1);
  if (index % 4 >= 2) c.params.top_p = static_cast<float>(uniform(0.6, 0.95));
  const bool same_rows = index % 2 == 0;
  c.logits.resize(static_cast<size_t>(c.k + 1) * c.vocab);
  for (size_t j = 0; j < c.logits.size(); ++j) {
    c.logits[j] = (same_rows && j >= static_cast<size_t>(c.vocab)) ? c.logits[j % c.vocab]
                                                                   : normal(rng);
  }
  FinishConfig(&c);
  for (int32_t i = 0; i < c.k; ++i) {
    const float* row = c.logits.data() + static_cast<size_t>(i) * c.vocab;
    std::vector<float> noisy(row, row + c.vocab);
    for (float& l : noisy) l += 0.7f * normal(rng);
    switch ((index + i) % 5) {
      case 0:
        c.q.push_back(DraftDistribution(noisy.data(), c.vocab, static_cast<float>(uniform(0.5, 1.5)),
                                        uniform_int(1, 64), static_cast<float>(uniform(0.7, 1.0))));
        break;
      case 1: c.q.push_back(SparseDist{{uniform_int(0, c.vocab - 1)}, {1.0f}}); break;
      case 2: {
        std::vector<int32_t> ids(c.vocab);
        for (int32_t j = 0; j < c.vocab; ++j) ids[j] = j;
        std::shuffle(ids.begin(), ids.end(), rng);
        ids.resize(uniform_int(1, c.vocab));
        std::vector<double> w(ids.size());
        double total = 0.0;
        for (double& x : w) total += (x = std::exponential_distribution<double>(1.0)(rng));
        SparseDist q;
        q.ids = ids;
        for (double x : w) q.probs.push_back(static_cast<float>(x / total));
        c.q.push_back(q);
        break;
      }
      case 3: c.q.push_back(FromDense(c.p[i])); break;
      default: c.q.push_back(DraftDistribution(noisy.data(), c.vocab, 0.0f, 64, 1.0f)); break;
    }
  }
  c.name = "config " + std::to_string(index) + " (vocab " + std::to_string(c.vocab) + ", k " +
           std::to_string(c.k) + ", T " + std::to_string(c.params.temperature) + ", top_k " +
           std::to_string(c.params.top_k) + ", top_p " + std::to_string(c.params.top_p) + ")";
  return c;
}

using Verifier = std::function<absl::StatusOr<VerifyResult>(const VerifyInput&)>;

struct Outcome {
  double min_p_value = 1.0;
  std::string worst;          // which check gave min_p_value
  int64_t forbidden = 0;      // emitted tokens with p = 0
  double accept_sigmas = 0;   // |observed - expected| acceptances of d_1, in sigmas
  int64_t errors = 0;         // verifier calls that failed
  int checks = 0, later_position_checks = 0;  // chi-square tests run; of them, positions >= 2
};

// sample_from: where the drafts really come from, if not c.q (a dishonest draft).
Outcome Simulate(const Config& c, const Verifier& verify, int64_t trials, uint64_t seed_base,
                 const std::vector<SparseDist>* sample_from = nullptr) {
  const std::vector<SparseDist>& source = sample_from ? *sample_from : c.q;
  const int32_t v = c.vocab, k = c.k;
  const uint64_t first_position = 1000 + seed_base % 97;
  std::vector<std::vector<int64_t>> emitted(k + 1, std::vector<int64_t>(v, 0));
  std::vector<int64_t> joint(static_cast<size_t>(v) * v, 0);  // completed (t_1, t_2)
  int64_t accepted_first = 0;
  Outcome out;
  std::vector<int32_t> drafts(k), seq(k + 1);
  for (int64_t trial = 0; trial < trials; ++trial) {
    const uint64_t seed = seed_base * 1000003ull + static_cast<uint64_t>(trial);
    for (int32_t i = 0; i < k; ++i) {
      drafts[i] =
          SampleSparse(source[i], UniformFloat(seed, first_position + i, RngPurpose::kDraftSample));
    }
    SamplingParams params = c.params;
    params.seed = seed;
    const absl::StatusOr<VerifyResult> r =
        verify(VerifyInput{c.logits.data(), v, k, drafts.data(), c.q.data(), params, first_position});
    if (!r.ok()) {
      ++out.errors;
      continue;
    }
    const int32_t n = r->accepted;
    for (int32_t j = 0; j < n; ++j) seq[j] = drafts[j];
    seq[n] = r->next_token;
    for (int32_t j = n + 1; j <= k; ++j) {  // complete with plain draws, a separate stream
      seq[j] = SampleFromProbs(c.p[j].data(), v,
                               UniformFloat(~seed, first_position + j, RngPurpose::kTargetSample));
    }
    for (int32_t j = 0; j <= n; ++j) {
      ++emitted[j][seq[j]];
      if (c.p[j][seq[j]] == 0.0f) ++out.forbidden;
    }
    ++joint[static_cast<size_t>(seq[0]) * v + seq[1]];
    if (n >= 1) ++accepted_first;
  }
  auto check = [&](double pv, const std::string& what) {
    ++out.checks;
    if (pv < out.min_p_value) {
      out.min_p_value = pv;
      out.worst = what;
    }
  };
  for (int32_t j = 0; j <= k; ++j) {
    int64_t total = 0;
    for (int64_t x : emitted[j]) total += x;
    if (total < 1000) continue;  // too few rounds reached this position
    if (j >= 1) ++out.later_position_checks;
    check(PooledChiSquarePValue(emitted[j], std::vector<double>(c.p[j].begin(), c.p[j].end())),
          "position " + std::to_string(j + 1) + (j == k ? " (bonus)" : "") + ", " +
              std::to_string(total) + " samples");
  }
  std::vector<double> pair_probs(joint.size());
  for (int32_t a = 0; a < v; ++a) {
    for (int32_t b = 0; b < v; ++b) pair_probs[a * v + b] = double(c.p[0][a]) * c.p[1][b];
  }
  check(PooledChiSquarePValue(joint, pair_probs), "joint (t1, t2)");
  // P(accept d_1) = sum_x min(p_0(x), q_1(x)).
  double rate = 0.0;
  for (size_t j = 0; j < c.q[0].ids.size(); ++j) {
    rate += std::min<double>(c.p[0][c.q[0].ids[j]], c.q[0].probs[j]);
  }
  rate = std::min(rate, 1.0);
  const double sd = std::sqrt(trials * rate * (1.0 - rate)) + 1.0;  // +1: rounding of rate
  out.accept_sigmas = std::abs(accepted_first - trials * rate) / sd;
  return out;
}

constexpr int64_t kTrials = 200000;
constexpr double kMinPValue = 1e-4;
constexpr int kConfigs = 40;

TEST(VerifyStats, StatsHelperKnownValues) {
  EXPECT_NEAR(GammaQ(0.5, 3.841459 / 2), 0.05, 1e-6);
  EXPECT_NEAR(GammaQ(5.0, 23.20925 / 2), 0.01, 1e-6);
  EXPECT_NEAR(GammaQ(50.0, 124.3421 / 2), 0.05, 1e-6);
}

TEST(VerifyStats, EmittedTokensFollowTheTargetDistribution) {
  const auto start = std::chrono::steady_clock::now();
  const Verifier verify = [](const VerifyInput& in) { return Verify(in); };
  double min_p = 1.0;
  int checks = 0, later = 0;
  for (int index = 0; index < kConfigs; ++index) {
    const Config c = RandomConfig(index);
    const Outcome o = Simulate(c, verify, kTrials, 17 + index);
    EXPECT_EQ(o.errors, 0) << c.name;
    EXPECT_EQ(o.forbidden, 0) << c.name;
    EXPECT_GT(o.min_p_value, kMinPValue) << c.name << ": " << o.worst;
    EXPECT_LT(o.accept_sigmas, 5.0) << c.name;
    min_p = std::min(min_p, o.min_p_value);
    checks += o.checks;
    later += o.later_position_checks;
  }
  std::printf("%d configs x %lld rounds: %d chi-square checks (%d at positions >= 2), "
              "smallest p-value %.3g, %.1f s\n", kConfigs,
              static_cast<long long>(kTrials), checks, later, min_p,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// --- Test of the test ------------------------------------------------------

enum class Bug {
  kNone, kResampleFromP, kReuseAcceptDraw, kBonusFromPreviousRow, kIgnoreTopK, kNeverAccept,
  kAcceptAbsentDraft,  // d_i missing from q_i: accept when p(d_i) > 0
};

// Verify rebuilt from the public pieces, with one bug switched on.
absl::StatusOr<VerifyResult> BuggyVerify(const VerifyInput& in, Bug bug) {
  SamplingParams rule = in.params;
  if (bug == Bug::kIgnoreTopK) rule.top_k = 0;
  const uint64_t seed = in.params.seed;
  std::vector<float> p;
  auto row = [&](int32_t i) { return in.target_logits + static_cast<size_t>(i) * in.vocab; };
  for (int32_t i = 0; i < in.k; ++i) {
    const uint64_t pos = in.first_position + i;
    TargetDistribution(row(i), in.vocab, rule, &p);
    const int32_t d = in.draft_tokens[i];
    const float qd = SparseProb(in.draft_dists[i], d);
    if (qd == 0.0f && bug != Bug::kAcceptAbsentDraft) {
      return VerifyResult{i, SampleFromProbs(p.data(), in.vocab,
                                             UniformFloat(seed, pos, RngPurpose::kResample))};
    }
    const float ua = UniformFloat(seed, pos, RngPurpose::kAccept);
    if (bug != Bug::kNeverAccept && AcceptDraftToken(p[d], qd, ua)) continue;  // p/0 = inf
    const float ur = bug == Bug::kReuseAcceptDraw ? ua : UniformFloat(seed, pos, RngPurpose::kResample);
    const bool from_p = bug == Bug::kResampleFromP || bug == Bug::kNeverAccept;
    return VerifyResult{i, from_p ? SampleFromProbs(p.data(), in.vocab, ur)
                                  : ResidualSample(p.data(), in.vocab, in.draft_dists[i], ur)};
  }
  const int32_t bonus_row = (bug == Bug::kBonusFromPreviousRow && in.k > 0) ? in.k - 1 : in.k;
  TargetDistribution(row(bonus_row), in.vocab, rule, &p);
  return VerifyResult{in.k, SampleFromProbs(p.data(), in.vocab,
                                            UniformFloat(seed, in.first_position + in.k,
                                                         RngPurpose::kTargetSample))};
}

// A draft that samples from its full softmax but sends only its top-3,
// renormalised, so d_i is sometimes absent from q_i. verify.h claims the
// output stays exact (x ~ p ignoring d_i) because the true draft distribution
// restricted to q's support is proportional to q.
TEST(VerifyStats, DraftOutsideItsSentTopNStaysExact) {
  std::mt19937_64 rng(99);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Config c;
  c.vocab = 12;
  c.k = 4;
  c.params = SamplingParams{.temperature = 1.0f, .top_p = 0.9f};
  c.logits.resize(static_cast<size_t>(c.k + 1) * c.vocab);
  for (float& l : c.logits) l = normal(rng);
  FinishConfig(&c);
  std::vector<SparseDist> full;
  for (int32_t i = 0; i < c.k; ++i) {
    std::vector<float> draft_logits(c.logits.begin() + i * c.vocab,
                                    c.logits.begin() + (i + 1) * c.vocab);
    for (float& l : draft_logits) l += 0.8f * normal(rng);
    full.push_back(DraftDistribution(draft_logits.data(), c.vocab, 1.0f, c.vocab, 1.0f));
    c.q.push_back(DraftDistribution(draft_logits.data(), c.vocab, 1.0f, 3, 1.0f));
  }
  const Outcome o = Simulate(c, [](const VerifyInput& in) { return Verify(in); }, kTrials, 5, &full);
  EXPECT_EQ(o.errors, 0);
  EXPECT_EQ(o.forbidden, 0);
  EXPECT_GT(o.min_p_value, kMinPValue) << o.worst;
  EXPECT_GE(o.checks, 4);
  // The tempting alternative, accepting an absent d_i whenever p(d_i) > 0, is biased.
  const Outcome naive = Simulate(
      c, [](const VerifyInput& in) { return BuggyVerify(in, Bug::kAcceptAbsentDraft); }, kTrials,
      5, &full);
  EXPECT_LT(naive.min_p_value, 1e-8) << naive.worst;
  std::printf("absent draft accepted when p > 0: min p %.3g at %s\n", naive.min_p_value,
              naive.worst.c_str());
}

// vocab 8, k 3, distinct rows, top-k 6; drafts that disagree with the target.
Config DesignedConfig() {
  Config c;
  c.vocab = 8;
  c.k = 3;
  c.params = SamplingParams{.temperature = 1.0f, .top_k = 6};
  c.logits = {2.0f, 1.0f, 0.5f, 0.0f, -0.5f, 1.5f, -1.0f, 0.2f,
              0.0f, 2.0f, 1.0f, 0.5f, 1.5f, -1.0f, 0.3f, 0.1f,
              1.0f, 0.0f, 2.0f, 0.7f, -0.3f, 0.4f, 1.2f, 0.0f,
              -1.0f, 0.5f, 0.0f, 2.0f, 1.0f, 0.3f, 0.6f, 1.4f};
  FinishConfig(&c);
  c.q = {SparseDist{{0, 1, 6, 3}, {0.3f, 0.4f, 0.2f, 0.1f}},
         SparseDist{{1, 4, 7}, {0.5f, 0.3f, 0.2f}},
         SparseDist{{2, 6}, {0.6f, 0.4f}}};
  return c;
}

TEST(VerifyStats, RebuiltVerifierMatchesTheLibrary) {
  const Config c = DesignedConfig();
  std::vector<int32_t> drafts(c.k);
  for (uint64_t seed = 0; seed < 20000; ++seed) {
    for (int32_t i = 0; i < c.k; ++i) {
      drafts[i] = SampleSparse(c.q[i], UniformFloat(seed, 50 + i, RngPurpose::kDraftSample));
    }
    SamplingParams params = c.params;
    params.seed = seed;
    const VerifyInput in{c.logits.data(), c.vocab, c.k, drafts.data(), c.q.data(), params, 50};
    const VerifyResult a = *Verify(in), b = *BuggyVerify(in, Bug::kNone);
    ASSERT_EQ(a.accepted, b.accepted) << seed;
    ASSERT_EQ(a.next_token, b.next_token) << seed;
  }
}

TEST(VerifyStats, HarnessRejectsBrokenVerifiers) {
  const Config c = DesignedConfig();
  const Outcome good = Simulate(c, [](const VerifyInput& in) { return Verify(in); }, kTrials, 3);
  EXPECT_GT(good.min_p_value, kMinPValue) << good.worst;
  EXPECT_LT(good.accept_sigmas, 5.0);
  EXPECT_EQ(good.forbidden, 0);
  const std::pair<Bug, const char*> bugs[] = {
      {Bug::kResampleFromP, "resample from p"},
      {Bug::kReuseAcceptDraw, "reuse the accept draw"},
      {Bug::kBonusFromPreviousRow, "bonus from row k-1"},
      {Bug::kIgnoreTopK, "ignore top-k"},
      {Bug::kNeverAccept, "never accept"},
  };
  for (const auto& [bug, name] : bugs) {
    const Verifier broken = [bug = bug](const VerifyInput& in) { return BuggyVerify(in, bug); };
    const Outcome o = Simulate(c, broken, kTrials, 3);
    const bool caught = o.min_p_value < 1e-8 || o.accept_sigmas > 10.0 || o.forbidden > 0;
    EXPECT_TRUE(caught) << name << ": min p " << o.min_p_value << " (" << o.worst
                        << "), acceptance off by " << o.accept_sigmas << " sigma";
    std::printf("broken verifier '%s': min p %.3g at %s, acceptance %.1f sigma, %lld forbidden\n",
                name, o.min_p_value, o.worst.c_str(), o.accept_sigmas,
                static_cast<long long>(o.forbidden));
  }
}

}  // namespace
}  // namespace specserve
