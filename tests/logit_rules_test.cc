// Constraints as a distribution transform (spec/logit_rules.h), exact under
// speculation:
//   - the transform itself (bias, penalties, min_tokens, ignore_eos, a
//     filter, min_p) against hand-computed rows, and its checks;
//   - chi-square: rounds of draft + Verify under a logit bias, penalties,
//     min_tokens, min_p and a grammar-like filter emit the exact constrained
//     distribution, computed independently by enumeration; broken variants
//     (no rollback of the state, transform on q but not on p) are rejected;
//   - greedy constrained output with the bundled models equals plain
//     constrained greedy (K = 0) at several K and both drafters, and the
//     rules observably change the output.
#include <cmath>
#include <functional>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "coordinator/local_engines.h"
#include "spec/logit_rules.h"
#include "spec/rng.h"
#include "spec/sampling.h"
#include "spec/verify.h"
#include "tests/stats.h"
#include "tests/test_models.h"
#include "tests/test_paths.h"

namespace specserve {
namespace {

// A grammar-like rule for the tests: a token may not repeat the one before it.
class NoRepeatFilter final : public TokenFilter {
 public:
  std::unique_ptr<TokenFilter> Clone() const override { return std::make_unique<NoRepeatFilter>(*this); }
  void Mask(float* logits, int32_t vocab) override {
    if (last_ >= 0 && last_ < vocab) logits[last_] = -INFINITY;
  }
  absl::Status Advance(int32_t token) override {
    if (token == last_) return absl::InvalidArgumentError("repeated token");
    last_ = token;
    return absl::OkStatus();
  }

 private:
  int32_t last_ = -1;
};

TEST(LogitRules, TransformAppliesEachRuleInOrder) {
  LogitRules r;
  r.logit_bias = {{0, 1.5f}, {3, -2.0f}};
  r.presence_penalty = 0.5f;
  r.frequency_penalty = 0.25f;
  r.min_tokens = 3;
  r.eos_ids = {4};
  r.stop_ids = {5};
  LogitState s(&r);
  ASSERT_TRUE(s.Advance(2).ok());
  ASSERT_TRUE(s.Advance(2).ok());
  std::vector<float> row(6, 1.0f);
  s.Apply(row.data(), 6);
  EXPECT_FLOAT_EQ(row[0], 2.5f);
  EXPECT_FLOAT_EQ(row[1], 1.0f);
  EXPECT_FLOAT_EQ(row[2], 1.0f - 0.5f - 0.25f * 2);
  EXPECT_FLOAT_EQ(row[3], -1.0f);
  EXPECT_EQ(row[4], -INFINITY);  // min_tokens: 2 generated < 3
  EXPECT_EQ(row[5], -INFINITY);

  // A fork advances alone; the original keeps its counts.
  LogitState fork = s;
  ASSERT_TRUE(fork.Advance(1).ok());
  EXPECT_EQ(fork.generated(), 3);
  EXPECT_EQ(s.generated(), 2);
  EXPECT_EQ(s.count(1), 0);
  EXPECT_EQ(fork.count(1), 1);
  std::fill(row.begin(), row.end(), 1.0f);
  fork.Apply(row.data(), 6);
  EXPECT_FLOAT_EQ(row[4], 1.0f);  // min_tokens reached on the fork
  EXPECT_FLOAT_EQ(row[1], 1.0f - 0.5f - 0.25f);

  r.ignore_eos = true;
  std::fill(row.begin(), row.end(), 1.0f);
  fork.Apply(row.data(), 6);
  EXPECT_EQ(row[4], -INFINITY);
  EXPECT_FLOAT_EQ(row[5], 1.0f);  // ignore_eos holds back the eos ids only
}

TEST(LogitRules, FilterMasksAndRefusesAndClonesItsState) {
  LogitRules r;
  r.filter = std::make_shared<NoRepeatFilter>();
  EXPECT_TRUE(r.active());
  LogitState s(&r);
  ASSERT_TRUE(s.Advance(1).ok());
  EXPECT_FALSE(s.Advance(1).ok());
  EXPECT_EQ(s.generated(), 1);  // unchanged by the refusal
  LogitState fork = s;
  ASSERT_TRUE(fork.Advance(2).ok());
  std::vector<float> row(3, 0.0f);
  s.Apply(row.data(), 3);
  EXPECT_EQ(row[1], -INFINITY);
  EXPECT_EQ(row[2], 0.0f);
  std::vector<float> row2(3, 0.0f);
  fork.Apply(row2.data(), 3);
  EXPECT_EQ(row2[2], -INFINITY);
  EXPECT_EQ(row2[1], 0.0f);

  // ApplyToBlock: row i under the state after d1..di; a refused draft stops it.
  const std::vector<TokenId> drafts = {2, 2};
  std::vector<float> rows(9, 0.0f);
  ApplyToBlock(s, drafts.data(), 2, 3, rows.data());
  EXPECT_EQ(rows[1], -INFINITY);      // row 0: after 1
  EXPECT_EQ(rows[3 + 2], -INFINITY);  // row 1: after 1, 2
  EXPECT_EQ(rows[6 + 2], 0.0f);       // row 2: never read (d2 was refused)
}

TEST(LogitRules, BadValuesAreRefusedNamingTheField) {
  const auto message = [](const LogitRules& r) { return std::string(ValidateLogitRules(r, 10).message()); };
  LogitRules r;
  EXPECT_TRUE(ValidateLogitRules(r, 10).ok());
  r.logit_bias = {{10, 1.0f}};
  EXPECT_NE(message(r).find("logit_bias"), std::string::npos);
  r.logit_bias = {{1, 101.0f}};
  EXPECT_NE(message(r).find("logit_bias"), std::string::npos);
  r.logit_bias = {{1, NAN}};
  EXPECT_NE(message(r).find("logit_bias"), std::string::npos);
  r.logit_bias = {};
  r.presence_penalty = 2.5f;
  EXPECT_NE(message(r).find("presence_penalty"), std::string::npos);
  r.presence_penalty = 0;
  r.frequency_penalty = -3;
  EXPECT_NE(message(r).find("frequency_penalty"), std::string::npos);
  r.frequency_penalty = 0;
  r.min_tokens = -1;
  EXPECT_NE(message(r).find("min_tokens"), std::string::npos);
  r.min_tokens = 0;
  r.grammar = "{}";  // a grammar nobody compiled is refused, never ignored
  EXPECT_NE(message(r).find("grammar"), std::string::npos);
  SamplingParams p;
  p.min_p = 1.5f;
  EXPECT_NE(std::string(Validate(p).message()).find("min_p"), std::string::npos);
  p.min_p = NAN;
  EXPECT_FALSE(Validate(p).ok());
}

TEST(MinP, DropsTokensBelowMinPTimesTheLargest) {
  const float logits[4] = {0.0f, -1.0f, -3.0f, -5.0f};  // e = 1, .368, .0498, .0067
  std::vector<float> p;
  TargetDistribution(logits, 4, SamplingParams{.temperature = 1.0f, .min_p = 0.1f}, &p);
  const double e1 = std::exp(-1.0);
  EXPECT_NEAR(p[0], 1.0 / (1.0 + e1), 1e-6);
  EXPECT_NEAR(p[1], e1 / (1.0 + e1), 1e-6);
  EXPECT_EQ(p[2], 0.0f);
  EXPECT_EQ(p[3], 0.0f);
  // At temperature 2 the ratios grow: e = 1, .607, .223, .082.
  TargetDistribution(logits, 4, SamplingParams{.temperature = 2.0f, .min_p = 0.1f}, &p);
  EXPECT_GT(p[2], 0.0f);
  EXPECT_EQ(p[3], 0.0f);
  // min_p = 1 keeps the argmax alone; min_p before top-p (vLLM's order).
  TargetDistribution(logits, 4, SamplingParams{.temperature = 1.0f, .min_p = 1.0f}, &p);
  EXPECT_EQ(p[0], 1.0f);
  const SparseDist q = DraftDistribution(logits, 4, 1.0f, 64, 1.0f, 0.1f);
  ASSERT_EQ(q.ids.size(), 2u);
  EXPECT_NEAR(q.probs[0], 1.0 / (1.0 + e1), 1e-6);
}

// --- Chi-square under speculation -----------------------------------------

constexpr int32_t kVocab = 4;
constexpr int32_t kLen = 4;   // output positions checked jointly: 4^4 cells
constexpr int32_t kK = 3;     // drafted per round

enum class Variant { kExact, kNoRollback, kTransformOnlyQ };

struct Harness {
  LogitRules rules;
  SamplingParams params;
  std::vector<TokenId> history;           // generated before the checked positions
  std::vector<std::vector<float>> raw;    // [kLen + kK][vocab] target rows by output position
  std::vector<std::vector<float>> draft;  // the draft's rows, noisy copies

  Harness() {
    rules.logit_bias = {{0, 1.0f}, {3, -0.7f}};
    rules.presence_penalty = 0.6f;
    rules.frequency_penalty = 0.4f;
    rules.min_tokens = 4;
    rules.eos_ids = {1};
    rules.filter = std::make_shared<NoRepeatFilter>();
    params.temperature = 1.0f;
    params.min_p = 0.08f;
    history = {2, 0};
    std::mt19937_64 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int32_t j = 0; j < kLen + kK + 1; ++j) {
      std::vector<float> row(kVocab), noisy(kVocab);
      for (int32_t t = 0; t < kVocab; ++t) {
        row[t] = normal(rng);
        noisy[t] = row[t] + 0.8f * normal(rng);
      }
      raw.push_back(row);
      draft.push_back(noisy);
    }
  }

  // The exact constrained p at output position j after `prefix` (history
  // included), written out independently of LogitState.
  std::vector<float> Exact(const std::vector<TokenId>& prefix, int32_t j) const {
    std::vector<float> l = raw[j];
    std::map<TokenId, int> count;
    for (TokenId t : prefix) ++count[t];
    for (const auto& [id, b] : rules.logit_bias) l[id] += b;
    for (const auto& [id, n] : count) l[id] -= rules.frequency_penalty * n + rules.presence_penalty;
    if (static_cast<int32_t>(prefix.size()) < rules.min_tokens) l[1] = -INFINITY;
    if (!prefix.empty()) l[prefix.back()] = -INFINITY;
    std::vector<float> p;
    TargetDistribution(l.data(), kVocab, params, &p);
    return p;
  }

  // One request's first kLen output tokens from speculative rounds.
  std::vector<TokenId> Run(uint64_t seed, Variant variant) const {
    LogitState committed(&rules);
    for (TokenId t : history) EXPECT_TRUE(committed.Advance(t).ok());
    SamplingParams sp = params;
    sp.seed = seed;
    const uint64_t base = history.size();  // absolute position of output position 0
    std::vector<TokenId> out;
    while (static_cast<int32_t>(out.size()) < kLen) {
      const int32_t j0 = static_cast<int32_t>(out.size());
      // Draft: q_i from the draft's row transformed by a fork after d1..d_{i-1}.
      LogitState fork = committed;
      std::vector<TokenId> d(kK);
      std::vector<SparseDist> q(kK);
      for (int32_t i = 0; i < kK; ++i) {
        std::vector<float> row = draft[j0 + i];
        fork.Apply(row.data(), kVocab);
        q[i] = DraftDistribution(row.data(), kVocab, 1.2f, 64, 1.0f);
        d[i] = SampleSparse(q[i], UniformFloat(seed, base + j0 + i, RngPurpose::kDraftSample));
        EXPECT_TRUE(fork.Advance(d[i]).ok());
      }
      // Target: rows j0..j0+K, transformed along the drafts.
      std::vector<float> rows;
      for (int32_t i = 0; i <= kK; ++i) rows.insert(rows.end(), raw[j0 + i].begin(), raw[j0 + i].end());
      if (variant != Variant::kTransformOnlyQ) ApplyToBlock(committed, d.data(), kK, kVocab, rows.data());
      const absl::StatusOr<VerifyResult> v =
          Verify(VerifyInput{rows.data(), kVocab, kK, d.data(), q.data(), sp, base + j0});
      EXPECT_TRUE(v.ok());
      if (!v.ok()) return out;
      for (int32_t i = 0; i < v->accepted; ++i) out.push_back(d[i]);
      out.push_back(v->next_token);
      // The verdict: the committed state advances by d1..dn, x; the broken
      // variant keeps the rejected drafts in its counts instead.
      const int32_t through = variant == Variant::kNoRollback ? kK : v->accepted;
      for (int32_t i = 0; i < through; ++i) committed.Advance(d[i]).IgnoreError();
      committed.Advance(v->next_token).IgnoreError();
    }
    out.resize(kLen);
    return out;
  }
};

// Smallest p-value over the joint of the first kLen tokens and each position
// alone; forbidden counts emitted tokens of exact probability 0.
double JointPValue(const Harness& h, Variant variant, int64_t trials, int64_t* forbidden) {
  int32_t cells = 1;
  for (int32_t j = 0; j < kLen; ++j) cells *= kVocab;
  std::vector<double> exact(cells, 0.0);
  for (int32_t c = 0; c < cells; ++c) {
    std::vector<TokenId> prefix = h.history;
    double p = 1.0;
    for (int32_t j = 0, rest = c; j < kLen; ++j, rest /= kVocab) {
      const TokenId t = rest % kVocab;
      p *= h.Exact(prefix, j)[t];
      prefix.push_back(t);
    }
    exact[c] = p;
  }
  std::vector<int64_t> counts(cells, 0);
  *forbidden = 0;
  for (int64_t trial = 0; trial < trials; ++trial) {
    const std::vector<TokenId> out = h.Run(9000 + trial, variant);
    int32_t c = 0;
    for (int32_t j = kLen - 1; j >= 0; --j) c = c * kVocab + out[j];
    ++counts[c];
    if (exact[c] == 0.0) ++(*forbidden);
  }
  return testing::PooledChiSquarePValue(counts, exact);
}

constexpr int64_t kTrials = 60000;

TEST(ConstrainedSpeculation, EmitsTheExactConstrainedDistribution) {
  const Harness h;
  int64_t forbidden = 0;
  const double pv = JointPValue(h, Variant::kExact, kTrials, &forbidden);
  EXPECT_EQ(forbidden, 0);
  EXPECT_GT(pv, 1e-4);
  std::printf("exact: joint p-value %.3g over %lld requests\n", pv, static_cast<long long>(kTrials));
}

TEST(ConstrainedSpeculation, HarnessRejectsBrokenVariants) {
  const Harness h;
  int64_t forbidden = 0;
  const double no_rollback = JointPValue(h, Variant::kNoRollback, kTrials, &forbidden);
  EXPECT_LT(no_rollback, 1e-6);
  const double only_q = JointPValue(h, Variant::kTransformOnlyQ, kTrials, &forbidden);
  EXPECT_LT(only_q, 1e-6);
  EXPECT_GT(forbidden, 0);  // p unconstrained emits what the rules forbid
  std::printf("no rollback: p %.3g; transform on q only: p %.3g\n", no_rollback, only_q);
}

// --- Greedy identity with the bundled models -------------------------------

struct Models {
  testing::LoadedModel target, draft;
};

std::vector<TokenId> Greedy(Models& m, v1::Drafter kind, KPolicy k, const LogitRules& rules,
                            const std::vector<TokenId>& stop, int max_new) {
  SessionSpec spec;
  spec.prompt = {1, 433, 290, 597, 266, 992, 1202, 4025, 4011, 313, 13, 260};  // golden.json's first, cut
  spec.max_new_tokens = max_new;
  spec.draft.lookup_min_ngram = 2;
  spec.rules = rules;
  std::vector<TokenId> out;
  LoopOptions opts;
  opts.k = k;
  opts.stop_tokens = stop;
  opts.on_tokens = [&](absl::Span<const TokenId> t) {
    out.insert(out.end(), t.begin(), t.end());
    return true;
  };
  auto st = GenerateInProcess(*m.target.backend, kind == v1::DRAFTER_MODEL ? m.draft.backend.get() : nullptr,
                              kind, spec, opts);
  EXPECT_TRUE(st.ok()) << st.status();
  return out;
}

TEST(ConstrainedGreedy, EqualsPlainConstrainedGreedyAtEveryKAndDrafter) {
  const std::string tp = testing::BundledModel("code-target-7m.gguf");
  const std::string dp = testing::BundledModel("code-draft-1m.gguf");
  if (tp.empty() || dp.empty()) SPECSERVE_MISSING_INPUT("bundled models");
  Models m{testing::LoadModel(tp), testing::LoadModel(dp)};
  constexpr int kMax = 24;
  const std::vector<TokenId> plain = Greedy(m, v1::DRAFTER_NONE, KPolicy::Fixed(0), {}, {}, kMax);
  ASSERT_EQ(plain.size(), static_cast<size_t>(kMax));
  // A token that first occurs at position 2 or later plays the end-of-sequence token.
  size_t stop_at = 2;
  while (stop_at + 1 < plain.size() && std::count(plain.begin(), plain.begin() + stop_at, plain[stop_at]) > 0) ++stop_at;
  const TokenId stop = plain[stop_at];

  struct Case {
    std::string name;
    LogitRules rules;
    std::function<void(const std::vector<TokenId>&)> check;
  };
  std::vector<Case> cases;
  {
    LogitRules r;
    r.logit_bias = {{plain[0], -100.0f}, {plain[5], 4.0f}};
    cases.push_back({"bias", r, [&](const std::vector<TokenId>& out) {
                       EXPECT_EQ(std::count(out.begin(), out.end(), plain[0]), 0);
                       EXPECT_NE(out, plain);
                     }});
  }
  {
    LogitRules r;
    r.presence_penalty = 1.5f;
    r.frequency_penalty = 1.0f;
    cases.push_back({"penalties", r, [&](const std::vector<TokenId>& out) { EXPECT_NE(out, plain); }});
  }
  {
    LogitRules r;  // the stop token is sampled at stop_at unless held back
    cases.push_back({"stop", r, [&](const std::vector<TokenId>& out) { EXPECT_EQ(out.size(), stop_at); }});
    r.min_tokens = static_cast<int32_t>(stop_at) + 4;
    r.eos_ids = {stop};
    cases.push_back({"min_tokens", r, [&](const std::vector<TokenId>& out) {
                       ASSERT_GE(out.size(), stop_at + 4);
                       EXPECT_EQ(std::count(out.begin(), out.begin() + stop_at + 4, stop), 0);
                     }});
    r.min_tokens = 0;
    r.ignore_eos = true;
    cases.push_back({"ignore_eos", r, [&](const std::vector<TokenId>& out) {
                       EXPECT_EQ(out.size(), static_cast<size_t>(kMax));
                       EXPECT_EQ(std::count(out.begin(), out.end(), stop), 0);
                     }});
  }
  {
    LogitRules r;
    r.filter = std::make_shared<NoRepeatFilter>();
    r.logit_bias = {{plain[1], 3.0f}};
    cases.push_back({"filter", r, [&](const std::vector<TokenId>& out) {
                       for (size_t i = 1; i < out.size(); ++i) EXPECT_NE(out[i], out[i - 1]);
                     }});
  }
  for (const Case& c : cases) {
    const std::vector<TokenId> stops = c.name == "bias" || c.name == "penalties" || c.name == "filter"
                                           ? std::vector<TokenId>{}
                                           : std::vector<TokenId>{stop};
    const std::vector<TokenId> ref = Greedy(m, v1::DRAFTER_NONE, KPolicy::Fixed(0), c.rules, stops, kMax);
    c.check(ref);
    for (v1::Drafter kind : {v1::DRAFTER_MODEL, v1::DRAFTER_NGRAM}) {
      for (int k : {1, 3, 6}) {
        EXPECT_EQ(Greedy(m, kind, KPolicy::Fixed(k), c.rules, stops, kMax), ref)
            << c.name << ", drafter " << kind << ", K " << k;
      }
    }
  }
}

}  // namespace
}  // namespace specserve
