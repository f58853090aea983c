// The speculative loop in one process: greedy identity with plain decoding,
// rollback invariants and leaks, acceptance explained by teacher forcing,
// and the sampled output's distribution.
#include <cmath>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/backend.h"
#include "coordinator/local_engines.h"
#include "coordinator/ngram_drafter.h"
#include "spec/draft_session.h"
#include "spec/prompt_lookup.h"
#include "spec/sampling.h"
#include "tests/test_models.h"
#include "tests/test_paths.h"

namespace specserve {
namespace {

using Engine = testing::LoadedModel;

Engine Load(const std::string& path, const BackendOptions& opts = {}) { return testing::LoadModel(path, opts); }

struct Golden {
  std::vector<std::vector<TokenId>> prompts;
  std::map<std::string, std::vector<std::vector<TokenId>>> greedy;  // model -> per prompt
};

Golden LoadGolden() {
  Golden g;
  const nlohmann::json j = testing::LoadJson(testing::GoldenPath("golden.json"));
  if (j.is_null()) return g;
  for (const auto& pr : j["prompts"]) {
    g.prompts.push_back(pr["ids"].get<std::vector<TokenId>>());
    for (const auto& [name, ref] : pr["models"].items()) {
      g.greedy[name].push_back(ref["greedy_32"].get<std::vector<TokenId>>());
    }
  }
  return g;
}

std::vector<TokenId> Decode(Engine& target, Engine* draft, v1::Drafter kind, const std::vector<TokenId>& prompt,
                         int max_new, KPolicy k, LoopStats* stats = nullptr, SamplingParams sp = {},
                         bool overlap = false, int lookup = 0) {
  SessionSpec spec;
  spec.prompt = prompt;
  spec.max_new_tokens = max_new;
  spec.target = sp;
  spec.draft.temperature = sp.temperature;
  spec.draft.lookup_min_ngram = lookup;
  std::vector<TokenId> out;
  LoopOptions opts;
  opts.k = k;
  opts.overlap = overlap;
  opts.on_tokens = [&](absl::Span<const TokenId> t) {
    out.insert(out.end(), t.begin(), t.end());
    return true;
  };
  auto st = GenerateInProcess(*target.backend, draft ? draft->backend.get() : nullptr, kind, spec, opts);
  EXPECT_TRUE(st.ok()) << st.status();
  if (stats && st.ok()) *stats = *st;
  return out;
}

class GreedyIdentity : public ::testing::TestWithParam<std::string> {};

// Speculative greedy output equals plain greedy decoding (golden.json's
// continuation, itself checked against llama.cpp) for every prompt, every K,
// adaptive K, and both drafters.
TEST_P(GreedyIdentity, EqualsPlainGreedyForEveryKAndDrafter) {
  const Golden g = LoadGolden();
  if (g.prompts.empty()) SPECSERVE_MISSING_INPUT("golden.json");
  const std::string path = testing::ModelPath(GetParam());
  if (path.empty()) SPECSERVE_MISSING_INPUT(GetParam());
  Engine target = Load(path);
  Engine draft = Load(testing::BundledModel("code-draft-1m.gguf"));
  const std::vector<KPolicy> ks = {KPolicy::Fixed(1), KPolicy::Fixed(2), KPolicy::Fixed(4), KPolicy::Fixed(8),
                                   KPolicy::Adaptive()};
  int64_t drafted = 0, accepted = 0;
  for (size_t i = 0; i < g.prompts.size(); ++i) {
    const auto& want = g.greedy.at(GetParam())[i];
    EXPECT_EQ(Decode(target, nullptr, v1::DRAFTER_NONE, g.prompts[i], 32, KPolicy::Fixed(0)), want) << "plain, prompt " << i;
    for (const KPolicy& k : ks) {
      for (v1::Drafter kind : {v1::DRAFTER_MODEL, v1::DRAFTER_NGRAM}) {
        LoopStats st;
        EXPECT_EQ(Decode(target, &draft, kind, g.prompts[i], 32, k, &st), want)
            << "prompt " << i << " K " << (k.adaptive() ? "adaptive" : std::to_string(k.Next()))
            << " drafter " << (kind == v1::DRAFTER_MODEL ? "model" : "ngram");
        if (kind == v1::DRAFTER_MODEL) {
          drafted += st.drafted;
          accepted += st.accepted;
        }
      }
      // The model drafter with prompt lookup (no draft pass for looked-up blocks).
      EXPECT_EQ(Decode(target, &draft, v1::DRAFTER_MODEL, g.prompts[i], 32, k, nullptr, {}, false, 2), want)
          << "prompt " << i << " K " << (k.adaptive() ? "adaptive" : std::to_string(k.Next())) << " lookup 2";
    }
  }
  EXPECT_EQ(target.backend->kv_pool().used_blocks(), 0);
  EXPECT_EQ(draft.backend->kv_pool().used_blocks(), 0);
  // The draft is a real model: it agrees with the target most of the time.
  EXPECT_GT(static_cast<double>(accepted) / drafted, 0.5);
}

INSTANTIATE_TEST_SUITE_P(Targets, GreedyIdentity, ::testing::Values("code-target-7m", "code-target-14m"),
                         [](const auto& info) { return info.param == "code-target-7m" ? "t7m" : "t14m"; });

// Drafter and target may use different quantizations: greedy speculative
// output still equals plain greedy decoding of the same target file.
TEST(GreedyIdentityQuantized, Q4KMTargetWithQ8Draft) {
  const Golden g = LoadGolden();
  const std::string tp = testing::SharedPath("models/variants/code-target-7m-q4_k_m.gguf");
  const std::string dp = testing::SharedPath("models/variants/code-draft-1m-q8_0.gguf");
  if (g.prompts.empty() || tp.empty() || dp.empty()) SPECSERVE_MISSING_INPUT("quantized variants");
  Engine target = Load(tp);
  Engine draft = Load(dp);
  for (size_t i = 0; i < g.prompts.size(); ++i) {
    const auto plain = Decode(target, nullptr, v1::DRAFTER_NONE, g.prompts[i], 48, KPolicy::Fixed(0));
    ASSERT_EQ(plain.size(), 48u);
    for (const KPolicy& k : {KPolicy::Fixed(4), KPolicy::Adaptive()}) {
      EXPECT_EQ(Decode(target, &draft, v1::DRAFTER_MODEL, g.prompts[i], 48, k), plain) << "prompt " << i;
    }
  }
}

// With int8 activations (--cpu-activations int8, llama.cpp's numerics) the
// model computes a slightly different function, but still one function: a
// verify pass gives each position the bits of one-token decoding, so greedy
// speculative output equals plain greedy decoding in the same mode, for
// sequential and overlapped rounds.
TEST(GreedyIdentityQuantized, Int8ActivationsQ4KMTargetWithQ8Draft) {
  const Golden g = LoadGolden();
  const std::string tp = testing::SharedPath("models/variants/code-target-7m-q4_k_m.gguf");
  const std::string dp = testing::SharedPath("models/variants/code-draft-1m-q8_0.gguf");
  if (g.prompts.empty() || tp.empty() || dp.empty()) SPECSERVE_MISSING_INPUT("quantized variants");
  BackendOptions int8;
  int8.cpu_activations = MatMulActivations::kInt8;
  Engine target = Load(tp, int8);
  Engine draft = Load(dp, int8);
  Engine fp32_target = Load(tp);
  int differs = 0;
  for (size_t i = 0; i < g.prompts.size(); ++i) {
    const auto plain = Decode(target, nullptr, v1::DRAFTER_NONE, g.prompts[i], 48, KPolicy::Fixed(0));
    ASSERT_EQ(plain.size(), 48u);
    differs += plain != Decode(fp32_target, nullptr, v1::DRAFTER_NONE, g.prompts[i], 48, KPolicy::Fixed(0));
    for (const KPolicy& k : {KPolicy::Fixed(4), KPolicy::Adaptive()}) {
      EXPECT_EQ(Decode(target, &draft, v1::DRAFTER_MODEL, g.prompts[i], 48, k), plain) << "prompt " << i;
    }
    EXPECT_EQ(Decode(target, &draft, v1::DRAFTER_MODEL, g.prompts[i], 48, KPolicy::Fixed(4), nullptr, {}, true),
              plain)
        << "prompt " << i << " overlapped";
  }
  EXPECT_EQ(target.backend->kv_pool().used_blocks(), 0);
  EXPECT_EQ(draft.backend->kv_pool().used_blocks(), 0);
  std::printf("int8 activations: %d of %zu greedy continuations differ from fp32's\n", differs, g.prompts.size());
}

// Drafting the next block while the target verifies changes nothing: the
// same tokens, greedy or sampled with a seed, as the sequential loop.
TEST(SpecOverlap, SameOutputAsSequential) {
  Engine target = Load(testing::BundledModel("code-target-7m.gguf"));
  Engine draft = Load(testing::BundledModel("code-draft-1m.gguf"));
  const std::vector<TokenId> prompt = {1, 433, 290, 597, 266, 992, 1202, 4025, 4011, 313};
  int64_t lookahead_rounds = 0;
  for (float temperature : {0.0f, 1.0f}) {
    for (int seed = 0; seed < 4; ++seed) {
      SamplingParams sp;
      sp.temperature = temperature;
      sp.seed = seed;
      for (int k : {1, 4}) {
        LoopStats st;
        const auto seq = Decode(target, &draft, v1::DRAFTER_MODEL, prompt, 80, KPolicy::Fixed(k), nullptr, sp);
        EXPECT_EQ(Decode(target, &draft, v1::DRAFTER_MODEL, prompt, 80, KPolicy::Fixed(k), &st, sp, true), seq)
            << "T " << temperature << " seed " << seed << " K " << k;
        lookahead_rounds += st.ahead_hits;
      }
    }
  }
  EXPECT_GT(lookahead_rounds, 10);  // the guess held in many rounds
  EXPECT_EQ(target.backend->kv_pool().used_blocks(), 0);
  EXPECT_EQ(draft.backend->kv_pool().used_blocks(), 0);
}

// After every round both caches hold the committed sequence minus the pending
// token (the draft may lack one more, dK, which it feeds next), and nothing
// leaks over 1000 rounds.
TEST(SpecRollback, BothSidesRollBackAndNothingLeaks) {
  Engine target = Load(testing::BundledModel("code-target-7m.gguf"));
  Engine draft = Load(testing::BundledModel("code-draft-1m.gguf"));
  const int t_free = target.backend->kv_pool().free_blocks();
  const int d_free = draft.backend->kv_pool().free_blocks();
  int64_t rounds = 0;
  for (int rep = 0; rep < 12 && rounds < 1000; ++rep) {
    SessionSpec spec;
    spec.prompt = {1, 433, 290, 597, 266};
    spec.prompt.push_back(300 + rep);
    spec.max_new_tokens = 300;
    spec.target.temperature = rep % 2 ? 1.0f : 0.0f;
    spec.target.seed = rep;
    spec.draft.temperature = spec.target.temperature;
    spec.draft.lookup_min_ngram = rep % 4 == 2 ? 2 : 0;  // some greedy runs with prompt lookup
    LocalVerifier verifier(*target.backend);
    LocalDrafter drafter(*draft.backend);
    LoopOptions opts;
    opts.k = rep % 3 == 0 ? KPolicy::Adaptive() : KPolicy::Fixed(1 + rep % 8);
    int64_t committed = static_cast<int64_t>(spec.prompt.size());
    opts.on_round = [&](const RoundRecord& r) {
      const int32_t drafted = r.drafted, acc = r.accepted;
      // The draft hears this verdict after the round's tokens are emitted:
      // its committed view is the round's start, and its cache holds at most
      // what it fed this round.
      EXPECT_EQ(static_cast<int64_t>(drafter.session().committed().size()), committed);
      EXPECT_LE(drafter.session().kv().length, committed - 1 + drafted);
      committed += acc + 1;
      ++rounds;
      EXPECT_EQ(verifier.session().kv().length, committed - 1);
      EXPECT_EQ(verifier.session().committed_length(), committed);
      // Blocks held never exceed what the length needs (allocated vs committed).
      EXPECT_EQ(static_cast<int>(verifier.session().kv().blocks.size()),
                KvPool::BlocksFor(verifier.session().kv().length, target.backend->kv_pool().block_size()));
    };
    auto st = RunSpeculative(spec, &drafter, verifier, opts);
    ASSERT_TRUE(st.ok()) << st.status();
  }
  EXPECT_GE(rounds, 1000);
  EXPECT_EQ(target.backend->kv_pool().free_blocks(), t_free);
  EXPECT_EQ(draft.backend->kv_pool().free_blocks(), d_free);
}

// Greedy acceptance is the draft's agreement with the target along the
// target's own output, at exactly the positions the loop compared: teacher-
// force the draft over the final sequence and count.
TEST(SpecAcceptance, GreedyAcceptanceEqualsTeacherForcedAgreement) {
  Engine target = Load(testing::BundledModel("code-target-7m.gguf"));
  Engine draft = Load(testing::BundledModel("code-draft-1m.gguf"));
  const Golden g = LoadGolden();
  std::vector<std::vector<TokenId>> prompts = g.prompts;
  if (prompts.empty()) prompts = {{1, 433, 290, 597, 266, 992, 1202}};
  for (const auto& prompt : prompts) {
    SessionSpec spec;
    spec.prompt = prompt;
    spec.max_new_tokens = 64;
    std::vector<TokenId> out;
    std::vector<std::pair<int64_t, int32_t>> compared;  // (position of d1, tokens compared)
    int64_t committed = static_cast<int64_t>(prompt.size());
    LoopOptions opts;
    opts.k = KPolicy::Fixed(4);
    opts.on_tokens = [&](absl::Span<const TokenId> t) {
      out.insert(out.end(), t.begin(), t.end());
      return true;
    };
    opts.on_round = [&](const RoundRecord& r) {
      const int32_t drafted = r.drafted, acc = r.accepted;
      compared.push_back({committed, std::min(drafted, acc + 1)});
      committed += acc + 1;
    };
    auto st = GenerateInProcess(*target.backend, draft.backend.get(), v1::DRAFTER_MODEL, spec, opts);
    ASSERT_TRUE(st.ok());
    // Teacher forcing: the draft's argmax at every position of prompt + out.
    std::vector<TokenId> seq = prompt;
    seq.insert(seq.end(), out.begin(), out.end());
    KvSeq kv;
    std::vector<float> logits;
    ASSERT_TRUE(draft.backend->Forward({ForwardSeq{&kv, seq, static_cast<int32_t>(seq.size())}}, &logits).ok());
    draft.backend->kv_pool().Release(kv);
    const int32_t V = draft.model->config.vocab;
    int64_t agree = 0, total = 0;
    for (auto [pos, n] : compared) {
      for (int32_t i = 0; i < n && pos + i < static_cast<int64_t>(seq.size()); ++i) {
        // Row pos + i - 1 predicts the token at position pos + i.
        agree += Argmax(logits.data() + (pos + i - 1) * V, V) == seq[pos + i];
        ++total;
      }
    }
    EXPECT_EQ(total, st->drafted - (st->drafted - total));  // every drafted token up to the first miss
    EXPECT_EQ(agree, st->accepted) << "teacher-forced agreement must equal measured acceptance";
  }
}

// At temperature 1 the first emitted token follows the target's own
// distribution, whatever the draft proposed (chi-square over fixed seeds).
TEST(SpecSampling, FirstTokenFollowsTargetDistribution) {
  Engine target = Load(testing::BundledModel("code-target-7m.gguf"));
  Engine draft = Load(testing::BundledModel("code-draft-1m.gguf"));
  const std::vector<TokenId> prompt = {1, 433, 290, 597, 266, 992, 1202, 4025, 4011, 313};
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 20;
  // Exact target distribution of the first new token.
  KvSeq kv;
  std::vector<float> logits, p;
  ASSERT_TRUE(target.backend->Forward({ForwardSeq{&kv, prompt, 1}}, &logits).ok());
  target.backend->kv_pool().Release(kv);
  TargetDistribution(logits.data(), target.model->config.vocab, sp, &p);
  const int n = 2000;
  std::map<TokenId, int> counts;
  for (int s = 0; s < n; ++s) {
    sp.seed = 1000 + s;
    counts[Decode(target, &draft, v1::DRAFTER_MODEL, prompt, 2, KPolicy::Fixed(3), nullptr, sp).at(0)]++;
  }
  double chi2 = 0;
  int dof = -1;
  double other_p = 0;
  int other_n = 0;
  for (TokenId t = 0; t < static_cast<TokenId>(p.size()); ++t) {
    if (p[t] == 0) {
      EXPECT_EQ(counts.count(t), 0u) << "token " << t << " has zero target probability";
      continue;
    }
    const int c = counts.count(t) ? counts[t] : 0;
    if (p[t] * n < 5) {  // pool rare tokens
      other_p += p[t];
      other_n += c;
      continue;
    }
    chi2 += (c - p[t] * n) * (c - p[t] * n) / (p[t] * n);
    ++dof;
  }
  if (other_p * n >= 5) {
    chi2 += (other_n - other_p * n) * (other_n - other_p * n) / (other_p * n);
    ++dof;
  }
  ASSERT_GT(dof, 2);
  // 99.99th percentile of chi-square ~ dof + 3.72 * sqrt(2 dof) + 8 for small dof (generous).
  EXPECT_LT(chi2, dof + 4.0 * std::sqrt(2.0 * dof) + 10) << "dof " << dof;
}

// The draft applies a verdict by truncating to the longest committed prefix
// it holds; after all K are accepted it lacks dK and feeds it with x.
TEST(SpecRollback, DraftAppliesVerdictsExactly) {
  Engine draft = Load(testing::BundledModel("code-draft-1m.gguf"));
  DraftSession s(draft.backend->kv_pool(), draft.backend->config());
  SessionSpec spec;
  spec.prompt = {1, 433, 290, 597};
  spec.max_new_tokens = 50;
  ForwardSeq pass;
  std::vector<float> logits;
  ASSERT_TRUE(s.Open(spec, &pass).ok());
  ASSERT_TRUE(draft.backend->Forward({pass}, &logits).ok());
  auto propose = [&](int64_t round, int32_t k) {
    EXPECT_TRUE(s.BeginPropose(round, k).ok());
    while (s.NextStep(&pass)) {
      EXPECT_TRUE(draft.backend->Forward({pass}, &logits).ok());
      s.FinishStep(logits.data());
    }
    return s.TakeProposal();
  };
  Proposal p0 = propose(0, 4);
  ASSERT_EQ(p0.tokens.size(), 4u);
  EXPECT_EQ(s.kv().length, 3 + 4);  // prompt minus pending, then pending, d1..d3 fed
  // Two accepted: committed = prompt + d1 d2 + x (7 tokens); cache keeps 6.
  ASSERT_TRUE(s.Commit({0, 2, 77}).ok());
  EXPECT_EQ(s.committed().size(), 7u);
  EXPECT_EQ(s.kv().length, 6);
  // A plain round (nothing proposed) commits only its token; no pass.
  ASSERT_TRUE(s.Commit({1, 0, 78}).ok());
  EXPECT_EQ(s.kv().length, 6);
  Proposal p2 = propose(2, 3);
  EXPECT_EQ(s.kv().length, 8 + 2);  // committed 8: two fed to catch up, then d1, d2
  // All three accepted: committed = 8 + 3 + 1 = 12; the cache lacks d3.
  ASSERT_TRUE(s.Commit({2, 3, 79}).ok());
  EXPECT_EQ(s.committed().size(), 12u);
  EXPECT_EQ(s.kv().length, 10);
  ASSERT_TRUE(s.Commit({3, 0, 80}).ok());
  propose(4, 1);  // feeds d3, x, then 80: one pass of 3 tokens
  EXPECT_EQ(s.kv().length, 13);
  // A stale, replayed or ill-fitting message is refused and changes nothing.
  EXPECT_EQ(s.Commit({3, 0, 80}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.Commit({4, 2, 80}).code(), absl::StatusCode::kInvalidArgument);  // 2 of 1 proposed
  EXPECT_EQ(s.Commit({4, 0, 1 << 20}).code(), absl::StatusCode::kInvalidArgument);  // outside the vocabulary
  EXPECT_EQ(s.BeginPropose(4, 1).code(), absl::StatusCode::kFailedPrecondition);  // one proposal per round
  EXPECT_EQ(s.BeginPropose(5, 1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.committed().size(), 13u);
  EXPECT_EQ(s.kv().length, 13);
  ASSERT_TRUE(s.Commit({4, 1, 81}).ok());
  EXPECT_EQ(s.committed().size(), 15u);
  s.Close();
  EXPECT_EQ(draft.backend->kv_pool().used_blocks(), 0);
}

// Prompt lookup in the draft session: when the committed text repeats, the
// proposal is what followed the earlier occurrence, one-hot, with no pass;
// the next model proposal first feeds every token the cache lacks.
TEST(SpecRollback, DraftLookupProposesTheRepeatWithoutAPass) {
  Engine draft = Load(testing::BundledModel("code-draft-1m.gguf"));
  DraftSession s(draft.backend->kv_pool(), draft.backend->config());
  SessionSpec spec;
  spec.prompt = {1, 433, 290, 597, 266, 433, 290};  // "433 290" occurred before, followed by 597 266
  spec.max_new_tokens = 50;
  spec.draft.lookup_min_ngram = 2;
  ForwardSeq pass;
  std::vector<float> logits;
  ASSERT_TRUE(s.Open(spec, &pass).ok());
  ASSERT_TRUE(draft.backend->Forward({pass}, &logits).ok());
  ASSERT_TRUE(s.BeginPropose(0, 3).ok());
  EXPECT_FALSE(s.NextStep(&pass));  // no draft pass
  Proposal p = s.TakeProposal();
  EXPECT_EQ(p.tokens, (std::vector<TokenId>{597, 266, 433}));
  EXPECT_TRUE(p.looked_up);  // the coordinator's metrics label it drafter="lookup"
  ASSERT_EQ(p.dists.size(), 3u);
  EXPECT_EQ(p.dists[1].ids, std::vector<TokenId>{266});
  EXPECT_EQ(p.dists[1].probs, std::vector<float>{1.0f});
  EXPECT_EQ(s.kv().length, 6);  // the prompt minus its pending token, nothing more
  // Two accepted, then 999 (no earlier occurrence of "266 999"): a model
  // proposal whose first pass feeds the pending token, both accepted tokens and 999.
  ASSERT_TRUE(s.Commit({0, 2, 999}).ok());
  ASSERT_TRUE(s.BeginPropose(1, 2).ok());
  ASSERT_TRUE(s.NextStep(&pass));
  EXPECT_EQ(pass.tokens.size(), 4u);
  ASSERT_TRUE(draft.backend->Forward({pass}, &logits).ok());
  s.FinishStep(logits.data());
  ASSERT_TRUE(s.NextStep(&pass));
  ASSERT_TRUE(draft.backend->Forward({pass}, &logits).ok());
  s.FinishStep(logits.data());
  EXPECT_FALSE(s.NextStep(&pass));
  const Proposal model = s.TakeProposal();
  EXPECT_EQ(model.tokens.size(), 2u);
  EXPECT_FALSE(model.looked_up);
  EXPECT_EQ(s.committed().size(), 10u);
  EXPECT_EQ(s.kv().length, 11);  // committed 10, then d1 fed
  // A sampled draft never looks up.
  s.Close();
  spec.draft.temperature = 1.0f;
  ASSERT_TRUE(s.Open(spec, &pass).ok());
  ASSERT_TRUE(draft.backend->Forward({pass}, &logits).ok());
  ASSERT_TRUE(s.BeginPropose(0, 3).ok());
  EXPECT_TRUE(s.NextStep(&pass));
  s.Close();
  EXPECT_EQ(draft.backend->kv_pool().used_blocks(), 0);
}

TEST(NgramDrafter, FindsTheMostRecentLongestMatch) {
  const std::vector<TokenId> ctx = {5, 6, 7, 8, 9, 5, 6, 7, 1, 2, 3, 5, 6, 7};
  // Suffix (5, 6, 7) last occurred at 5..7 followed by 1, 2, 3.
  EXPECT_EQ(PromptLookup(ctx, 3, 4, 1), (std::vector<TokenId>{1, 2, 3}));
  EXPECT_EQ(PromptLookup(ctx, 8, 4, 1).size(), 6u);  // runs to the end of the context
  EXPECT_TRUE(PromptLookup({1, 2, 3}, 4, 4, 1).empty());
}

TEST(SpecVocabulary, BadSpecsAreRefused) {
  Engine target = Load(testing::BundledModel("code-target-7m.gguf"));
  LocalVerifier v(*target.backend);
  SessionSpec spec;
  EXPECT_EQ(v.Open(spec).code(), absl::StatusCode::kInvalidArgument);  // empty prompt
  spec.prompt = {1, 5000};
  EXPECT_EQ(v.Open(spec).code(), absl::StatusCode::kInvalidArgument);  // out of vocabulary
  spec.prompt = {1, 5};
  spec.max_new_tokens = 5000;
  EXPECT_EQ(v.Open(spec).code(), absl::StatusCode::kInvalidArgument);  // past the context
  spec.max_new_tokens = 5;
  ASSERT_TRUE(v.Open(spec).ok());
  Proposal p;
  p.tokens = {7};
  p.dists = {SparseDist{{7}, {1.0f}}};
  EXPECT_EQ(v.Verify(3, p).status().code(), absl::StatusCode::kFailedPrecondition);  // wrong round
  auto r = v.Verify(0, p);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(v.Verify(0, p).status().code(), absl::StatusCode::kFailedPrecondition);  // replayed round
  p.tokens = {9999};
  EXPECT_EQ(v.Verify(1, p).status().code(), absl::StatusCode::kInvalidArgument);
  v.Close();
  EXPECT_EQ(target.backend->kv_pool().used_blocks(), 0);
}

}  // namespace
}  // namespace specserve
