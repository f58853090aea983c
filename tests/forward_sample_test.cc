// Backend::ForwardSample, the draft's sampling step chosen by the backend
// (common/backend.h, spec/forward_sample.h). On the CPU it is bit for bit
// what the draft did before it existed (Forward, then DraftDistribution and
// SampleSparse with the position's kDraftSample draw), per batch and through
// the in-process draft engine (LocalDrafter) over several rounds, greedy and
// seeded sampled; a bad rule changes nothing. On CUDA (skipping, saying so,
// without a device): the sampling kernel gives exactly the host's tokens and
// distributions, on the backend's own logits and on adversarial rows (ties,
// -inf, NaN), and copies back O(N) bytes per sequence, never O(vocab).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/make_backend.h"
#include "common/backend.h"
#include "coordinator/local_engines.h"
#include "spec/draft_session.h"
#include "spec/forward_sample.h"
#include "spec/rng.h"
#include "spec/sampling.h"
#include "tests/backend_ops_harness.h"
#include "tests/forward_step_testing.h"
#include "tests/test_models.h"

#if defined(SPECSERVE_HAVE_CUDA)
#include "kernels/cuda_draft_sample.cuh"
#endif

namespace specserve::testing {
namespace {

// The draft's step as it was written before ForwardSample (the reference).
DraftSample OldHostStep(const float* logits, int32_t vocab, const DraftSampleInput& r) {
  DraftSample s;
  s.dist = DraftDistribution(logits, vocab, r.temperature, r.top_n, r.top_p);
  s.token = SampleSparse(s.dist, UniformFloat(r.seed, r.position, RngPurpose::kDraftSample));
  return s;
}

// Bit for bit: the token, the ids and the probabilities' bits.
void ExpectSameSample(const DraftSample& got, const DraftSample& want, const std::string& what) {
  EXPECT_EQ(got.token, want.token) << what;
  ASSERT_EQ(got.dist.ids, want.dist.ids) << what;
  ASSERT_EQ(got.dist.probs.size(), want.dist.probs.size()) << what;
  EXPECT_EQ(std::memcmp(got.dist.probs.data(), want.dist.probs.data(), want.dist.probs.size() * sizeof(float)), 0)
      << what;
}

DraftSampleInput RandomRule(std::mt19937& rng, int i) {
  DraftSampleInput r;
  if (i % 3 != 0) {  // every third greedy, the rest sampled
    r.temperature = std::vector<float>{0.3f, 0.8f, 1.0f, 1.7f}[rng() % 4];
    r.top_n = std::vector<int32_t>{1, 8, 16, 64}[rng() % 4];
    r.top_p = rng() % 3 == 0 ? 0.9f : 1.0f;
  }
  r.seed = (static_cast<uint64_t>(rng()) << 32) | rng();
  r.position = rng() % 5000;
  return r;
}

// One sequence of the test batch: its cache, the pass's tokens and rule.
struct Seq {
  KvSeq kv;
  std::vector<TokenId> feed;
  DraftSampleInput rule;
  bool sampled = true;
  int32_t n_logits = 1;
};

// Prefills a random prompt per sequence, then gives each a step of 1..3
// tokens with a rule; ruleless[i]: no rule, and 2 logits rows (as a caller
// that wants its logits).
std::vector<std::unique_ptr<Seq>> MakeBatch(Backend& b, uint32_t seed, const std::vector<bool>& ruleless) {
  const int32_t V = b.config().vocab;
  std::mt19937 rng(seed);
  std::vector<std::unique_ptr<Seq>> seqs;
  std::vector<float> lg;
  for (size_t i = 0; i < ruleless.size(); ++i) {
    auto s = std::make_unique<Seq>();
    std::vector<TokenId> prompt{1};
    const int n = Uniform(rng, 2, 40);
    for (int j = 1; j < n; ++j) prompt.push_back(Uniform(rng, 3, V - 1));
    EXPECT_TRUE(b.Forward({ForwardSeq{&s->kv, prompt, 0}}, &lg).ok());
    const int steps = Uniform(rng, 1, 3);
    for (int j = 0; j < steps; ++j) s->feed.push_back(Uniform(rng, 3, V - 1));
    s->rule = RandomRule(rng, static_cast<int>(i));
    if (ruleless[i]) {
      s->sampled = false;
      s->feed.push_back(Uniform(rng, 3, V - 1));
      s->n_logits = 2;
    }
    seqs.push_back(std::move(s));
  }
  return seqs;
}

std::vector<const DraftSampleInput*> Rules(const std::vector<std::unique_ptr<Seq>>& seqs) {
  std::vector<const DraftSampleInput*> rules;
  for (const auto& s : seqs) rules.push_back(s->sampled ? &s->rule : nullptr);
  return rules;
}

// The batch through Forward + the old host step, rolled back, then through
// ForwardSample: the same tokens and q, and the ruleless rows bit for bit.
void ExpectForwardSampleIsForwardThenTheHostStep(Backend& b, uint32_t seed, const std::vector<bool>& ruleless) {
  const int32_t V = b.config().vocab;
  auto seqs = MakeBatch(b, seed, ruleless);
  const std::vector<int32_t> lengths = Lengths(seqs);
  auto sampled = [&](size_t i) { return seqs[i]->sampled; };
  std::vector<DraftSample> want;
  std::vector<std::vector<float>> want_rows;
  ForwardThenHost(
      b, seqs, sampled, [&](size_t i, const float* rows) { return OldHostStep(rows, V, seqs[i]->rule); }, &want,
      &want_rows);

  const int64_t bytes_before = b.sample_bytes_to_host();
  SampleBatchOutput out;
  absl::Status st = b.ForwardSample(Passes(seqs), Rules(seqs), &out);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(out.samples.size(), seqs.size());
  EXPECT_EQ(b.sample_bytes_to_host() - bytes_before, out.bytes_to_host);
  ExpectStepOutput(b, seqs, lengths, sampled, out.logits, out.first_row, want_rows, [&](size_t i) {
    ExpectSameSample(out.samples[i], want[i], "sequence " + std::to_string(i));
  });
}

LoadedModel Draft(const std::string& kind) {
  BackendOptions opts;
  opts.kind = kind;
  opts.threads = 2;
  const std::string path = ModelPath("code-draft-1m");
  if (path.empty()) return {};
  return LoadModel(path, opts);
}

// --- The CPU backend --------------------------------------------------------

TEST(CpuForwardSample, IsForwardThenTheHostStep) {
  LoadedModel d = Draft("cpu");
  if (d.backend == nullptr) GTEST_SKIP() << "code-draft-1m not present";
  EXPECT_EQ(d.backend->sample_location(), "cpu");
  for (uint32_t seed : {1u, 2u, 3u}) {
    ExpectForwardSampleIsForwardThenTheHostStep(*d.backend, seed, {false, false, true, false, false, false, true});
  }
  EXPECT_EQ(d.backend->sample_bytes_to_host(), 0);
}

TEST(CpuForwardSample, BadRuleChangesNothing) {
  LoadedModel d = Draft("cpu");
  if (d.backend == nullptr) GTEST_SKIP() << "code-draft-1m not present";
  auto seqs = MakeBatch(*d.backend, 5, {false, false});
  const std::vector<int32_t> lengths = Lengths(seqs);
  SampleBatchOutput out;
  seqs[1]->rule.top_n = 0;
  absl::Status st = d.backend->ForwardSample(Passes(seqs), Rules(seqs), &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  seqs[1]->rule.top_n = 8;
  seqs[1]->rule.top_p = 0.0f;
  st = d.backend->ForwardSample(Passes(seqs), Rules(seqs), &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  seqs[1]->rule.top_p = 1.0f;
  seqs[0]->n_logits = 2;  // a draft step samples from one row
  st = d.backend->ForwardSample(Passes(seqs), Rules(seqs), &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("exactly 1"), std::string::npos) << st;
  for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i]->kv.length, lengths[i]);
  for (auto& s : seqs) d.backend->kv_pool().Release(s->kv);
}

// The in-process draft engine (LocalDrafter: ForwardSample) against a
// DraftSession driven the way the draft ran before (Forward, then the old
// host step at position committed + drafted so far) over rounds with
// verdicts that accept all, part and none of a proposal.
void ExpectDrafterIsTheOldLoop(Backend& b, const DraftRule& rule, uint64_t seed) {
  SessionSpec spec;
  spec.prompt = {1, 100, 200, 300, 400, 500, 600, 700, 800};
  spec.max_new_tokens = 120;
  spec.target.temperature = rule.temperature;
  spec.target.seed = seed;
  spec.draft = rule;
  LocalDrafter drafter(b);
  ASSERT_TRUE(drafter.Open(spec).ok());
  DraftSession old(b.kv_pool(), b.config());
  ForwardSeq pass;
  ASSERT_TRUE(old.Open(spec, &pass).ok());
  std::vector<float> logits;
  if (!pass.tokens.empty()) {
    ASSERT_TRUE(b.Forward({pass}, &logits).ok());
  }
  std::mt19937 rng(static_cast<uint32_t>(seed));
  for (int64_t round = 0; round < 10; ++round) {
    const int32_t k = Uniform(rng, 1, 6);
    absl::StatusOr<Proposal> got = drafter.Propose(round, k);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(old.BeginPropose(round, k).ok());
    std::vector<DraftSample> want;
    while (old.NextStep(&pass)) {
      ASSERT_TRUE(b.Forward({pass}, &logits).ok());
      DraftSampleInput r;
      r.temperature = rule.temperature;
      r.top_n = rule.top_n;
      r.top_p = rule.top_p;
      r.seed = seed;
      r.position = old.committed().size() + want.size();
      want.push_back(OldHostStep(logits.data(), b.config().vocab, r));
      old.FinishSampledStep(want.back());
    }
    ASSERT_EQ(got->tokens.size(), want.size()) << "round " << round;
    for (size_t i = 0; i < want.size(); ++i) {
      ExpectSameSample(DraftSample{got->tokens[i], got->dists[i]}, want[i],
                       "round " + std::to_string(round) + " token " + std::to_string(i));
    }
    // A verdict: all accepted, a prefix, or none, and some next token.
    const int32_t n = static_cast<int32_t>(got->tokens.size());
    const int32_t accepted = round % 3 == 0 ? n : round % 3 == 1 ? n / 2 : 0;
    const Verdict verdict{round, accepted, Uniform(rng, 3, b.config().vocab - 1)};
    ASSERT_TRUE(drafter.Commit(verdict).ok());
    ASSERT_TRUE(old.Commit(verdict).ok());
  }
  drafter.Close();
  old.Close();
  EXPECT_EQ(b.kv_pool().used_blocks(), 0);
}

TEST(CpuForwardSample, TheDraftEngineDraftsWhatTheOldLoopDid) {
  LoadedModel d = Draft("cpu");
  if (d.backend == nullptr) GTEST_SKIP() << "code-draft-1m not present";
  ExpectDrafterIsTheOldLoop(*d.backend, DraftRule{}, 0);  // greedy
  for (uint64_t seed : {7u, 8u}) {
    DraftRule r;
    r.temperature = 0.8f;
    r.top_n = 16;
    ExpectDrafterIsTheOldLoop(*d.backend, r, seed);
    r.temperature = 1.0f;
    r.top_n = 64;
    r.top_p = 0.9f;
    ExpectDrafterIsTheOldLoop(*d.backend, r, seed);
  }
}

// --- CUDA -------------------------------------------------------------------

TEST(CudaForwardSample, IsForwardThenTheHostStepAndCopiesBackOnlyTopN) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  LoadedModel d = Draft("cuda");
  ASSERT_NE(d.backend, nullptr);
  EXPECT_EQ(d.backend->sample_location(), "cuda");
  for (uint32_t seed : {1u, 2u, 3u, 4u}) {
    ExpectForwardSampleIsForwardThenTheHostStep(*d.backend, seed, {false, false, true, false, false, false, true});
  }
  // Every sequence sampled: token, count and N entries each, nothing of the rows.
  const int32_t V = d.backend->config().vocab;
  auto seqs = MakeBatch(*d.backend, 9, {false, false, false, false, false});
  int32_t max_n = 1;
  for (size_t i = 0; i < seqs.size(); ++i) {
    seqs[i]->rule.temperature = 1.0f;
    seqs[i]->rule.top_n = i == 2 ? 64 : 8;
    max_n = std::max(max_n, seqs[i]->rule.top_n);
  }
  const int64_t before = d.backend->sample_bytes_to_host();
  SampleBatchOutput out;
  ASSERT_TRUE(d.backend->ForwardSample(Passes(seqs), Rules(seqs), &out).ok());
  const int64_t B = static_cast<int64_t>(seqs.size());
  EXPECT_EQ(out.bytes_to_host, B * (2 + 2 * max_n) * 4);
  EXPECT_EQ(d.backend->sample_bytes_to_host() - before, out.bytes_to_host);
  EXPECT_LT(out.bytes_to_host * 10, B * V * static_cast<int64_t>(sizeof(float)));
  EXPECT_TRUE(out.logits.empty());
  EXPECT_GT(out.sample_seconds, 0.0);
  for (auto& s : seqs) d.backend->kv_pool().Release(s->kv);
}

// The draft engine on CUDA against the old loop on the same backend's logits.
TEST(CudaForwardSample, TheDraftEngineDraftsWhatTheOldLoopDid) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  LoadedModel d = Draft("cuda");
  ASSERT_NE(d.backend, nullptr);
  ExpectDrafterIsTheOldLoop(*d.backend, DraftRule{}, 0);
  DraftRule r;
  r.temperature = 0.8f;
  r.top_n = 64;
  r.top_p = 0.95f;
  for (uint64_t seed : {7u, 8u}) ExpectDrafterIsTheOldLoop(*d.backend, r, seed);
}

#if defined(SPECSERVE_HAVE_CUDA)
// Rows that break kernels: ties (coarse grids), -inf entries, NaN, rows
// with no finite value, flat and peaked rows, vocabularies smaller than top_n.
std::vector<float> HardRow(std::mt19937& rng, int32_t vocab, int style) {
  std::vector<float> row = Normal(rng, vocab, 0.0f, std::vector<float>{0.05f, 1.0f, 3.0f, 8.0f}[style % 4]);
  if (style % 5 == 1) {
    for (float& x : row) x = std::round(x * 2.0f) / 2.0f;  // many exact ties
  }
  if (style % 7 == 2) {
    for (float& x : row) {
      if (rng() % 10 == 0) x = -INFINITY;
    }
  }
  if (style % 11 == 3) row[rng() % vocab] = kNaN;
  if (style % 13 == 4) std::fill(row.begin(), row.end(), -INFINITY);
  if (style % 17 == 5) std::fill(row.begin(), row.end(), 0.25f);  // every id tied
  return row;
}

TEST(CudaDraftSampleKernel, MatchesTheHostStepOnHardRows) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cuda::DeviceDraftSampler sampler;
  std::mt19937 rng(11);
  for (int32_t vocab : {1, 5, 63, 64, 65, 4096, 32000, 128256}) {
    const int B = vocab > 32000 ? 8 : 40;
    std::vector<DraftSampleInput> rules;
    std::vector<float> logits;
    for (int b = 0; b < B; ++b) {
      DraftSampleInput r = RandomRule(rng, b);
      if (b % 5 == 4) r.temperature = 1e-3f;
      rules.push_back(r);
      const std::vector<float> row = HardRow(rng, vocab, static_cast<int>(rng() % 1000));
      logits.insert(logits.end(), row.begin(), row.end());
    }
    cuda::DeviceSampleStats stats;
    absl::StatusOr<std::vector<DraftSample>> got = sampler.Run(rules, logits.data(), vocab, stream, &stats);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), rules.size());
    for (int b = 0; b < B; ++b) {
      ExpectSameSample((*got)[b], OldHostStep(logits.data() + static_cast<size_t>(b) * vocab, vocab, rules[b]),
                       "vocab " + std::to_string(vocab) + " row " + std::to_string(b));
    }
  }
  cudaStreamDestroy(stream);
}
#endif

}  // namespace
}  // namespace specserve::testing
