// Backend::ForwardVerify, the verify step chosen by the backend
// (common/backend.h): on every backend present its results are bit for bit
// the CPU Verify's on the logits the same batch's Forward gives; a sequence
// without a block gets its logits rows; a malformed block changes nothing.
// On CUDA (skipping, saying so, without a device): only O(K) bytes per
// sequence come back, greedy speculative output equals plain decoding, and
// seeded sampled output equals the host verifier's token for token.
#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/make_backend.h"
#include "common/backend.h"
#include "coordinator/local_engines.h"
#include "spec/forward_verify.h"
#include "spec/verify.h"
#include "tests/backend_ops_harness.h"
#include "tests/forward_step_testing.h"
#include "tests/test_models.h"

namespace specserve::testing {
namespace {

// A draft distribution over n random ids that lists `must` (so the draft
// token was drawn from it) with random weights.
SparseDist RandomDist(std::mt19937& rng, int32_t vocab, int32_t must, int n) {
  SparseDist q;
  q.ids.push_back(must);
  while (static_cast<int>(q.ids.size()) < n) {
    const int32_t id = Uniform(rng, 0, vocab - 1);
    if (std::find(q.ids.begin(), q.ids.end(), id) == q.ids.end()) q.ids.push_back(id);
  }
  std::uniform_real_distribution<float> u(0.05f, 1.0f);
  float total = 0;
  for (size_t i = 0; i < q.ids.size(); ++i) total += q.probs.emplace_back(u(rng));
  for (float& p : q.probs) p /= total;
  return q;
}

// One sequence of the test batch: its cache, the pass's tokens and block.
struct Seq {
  KvSeq kv;
  std::vector<TokenId> feed;  // [pending, d1..dK]
  std::vector<TokenId> drafts;
  std::vector<SparseDist> dists;
  VerifyInput block;
  bool verified = true;
  int32_t n_logits = 0;
};

// Prefills len[i] random tokens per sequence, then gives each a block of
// ks[i] drafted tokens under its own rule (greedy, or seeded sampling with
// top-k / top-p). ks[i] < 0: no block (a block-less pass of 2 tokens and 1
// logits row).
std::vector<std::unique_ptr<Seq>> MakeBatch(Backend& b, uint32_t seed, const std::vector<int>& ks) {
  const int32_t V = b.config().vocab;
  std::mt19937 rng(seed);
  std::vector<std::unique_ptr<Seq>> seqs;
  std::vector<float> lg;
  for (size_t i = 0; i < ks.size(); ++i) {
    auto s = std::make_unique<Seq>();
    std::vector<TokenId> prompt{1};
    const int n = Uniform(rng, 2, 40);
    for (int j = 1; j < n; ++j) prompt.push_back(Uniform(rng, 3, V - 1));
    EXPECT_TRUE(b.Forward({ForwardSeq{&s->kv, prompt, 0}}, &lg).ok());
    s->feed.push_back(Uniform(rng, 3, V - 1));
    if (ks[i] < 0) {
      s->verified = false;
      s->feed.push_back(Uniform(rng, 3, V - 1));
      s->n_logits = 1;
      seqs.push_back(std::move(s));
      continue;
    }
    for (int j = 0; j < ks[i]; ++j) {
      s->drafts.push_back(Uniform(rng, 3, V - 1));
      s->dists.push_back(RandomDist(rng, V, s->drafts.back(), Uniform(rng, 1, 8)));
    }
    s->feed.insert(s->feed.end(), s->drafts.begin(), s->drafts.end());
    s->n_logits = ks[i] + 1;
    VerifyInput& in = s->block;
    in.vocab = V;
    in.k = ks[i];
    in.draft_tokens = s->drafts.data();
    in.draft_dists = s->dists.data();
    in.first_position = static_cast<uint64_t>(s->kv.length + 1);
    if (i % 3 != 0) {  // every third greedy, the rest sampled
      in.params.temperature = 0.5f + 0.25f * static_cast<float>(i % 4);
      in.params.top_k = i % 2 == 0 ? 40 : 0;
      in.params.top_p = i % 5 == 1 ? 0.9f : 1.0f;
      in.params.seed = 1000 + i;
    }
    seqs.push_back(std::move(s));
  }
  return seqs;
}

std::vector<const VerifyInput*> Blocks(const std::vector<std::unique_ptr<Seq>>& seqs) {
  std::vector<const VerifyInput*> blocks;
  for (const auto& s : seqs) blocks.push_back(s->verified ? &s->block : nullptr);
  return blocks;
}

// The batch through Forward + the CPU Verify, rolled back, then through
// ForwardVerify: the same results, and the block-less rows bit for bit.
void ExpectForwardVerifyIsForwardThenVerify(Backend& b, uint32_t seed, const std::vector<int>& ks) {
  auto seqs = MakeBatch(b, seed, ks);
  const std::vector<int32_t> lengths = Lengths(seqs);
  auto verified = [&](size_t i) { return seqs[i]->verified; };
  std::vector<VerifyResult> want;
  std::vector<std::vector<float>> want_rows;
  ForwardThenHost(
      b, seqs, verified,
      [&](size_t i, const float* rows) {
        VerifyInput in = seqs[i]->block;
        in.target_logits = rows;
        absl::StatusOr<VerifyResult> v = Verify(in);
        EXPECT_TRUE(v.ok()) << v.status();
        return v.ok() ? *v : VerifyResult{};
      },
      &want, &want_rows);

  const int64_t bytes_before = b.verify_bytes_to_host();
  VerifyBatchOutput out;
  absl::Status st = b.ForwardVerify(Passes(seqs), Blocks(seqs), &out);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(out.results.size(), seqs.size());
  EXPECT_EQ(b.verify_bytes_to_host() - bytes_before, out.bytes_to_host);
  ExpectStepOutput(b, seqs, lengths, verified, out.logits, out.first_row, want_rows, [&](size_t i) {
    EXPECT_EQ(out.results[i].accepted, want[i].accepted) << "sequence " << i;
    EXPECT_EQ(out.results[i].next_token, want[i].next_token) << "sequence " << i;
    EXPECT_EQ(out.results[i].accept_mask, AcceptMask(want[i].accepted)) << "sequence " << i;
  });
}

LoadedModel Target(const std::string& kind) {
  BackendOptions opts;
  opts.kind = kind;
  opts.threads = 2;
  const std::string path = ModelPath("code-target-7m");
  if (path.empty()) return {};
  return LoadModel(path, opts);
}

// --- Every backend --------------------------------------------------------

TEST(CpuForwardVerify, IsForwardThenTheCpuVerify) {
  LoadedModel t = Target("cpu");
  if (t.backend == nullptr) GTEST_SKIP() << "code-target-7m not present";
  EXPECT_EQ(t.backend->verify_location(), "cpu");
  for (uint32_t seed : {1u, 2u, 3u}) {
    ExpectForwardVerifyIsForwardThenVerify(*t.backend, seed, {4, 0, -1, 8, 2, 16, 1});
  }
  EXPECT_EQ(t.backend->verify_bytes_to_host(), 0);
}

TEST(CpuForwardVerify, MalformedBlockChangesNothing) {
  LoadedModel t = Target("cpu");
  if (t.backend == nullptr) GTEST_SKIP() << "code-target-7m not present";
  auto seqs = MakeBatch(*t.backend, 5, {2, 3});
  const std::vector<int32_t> lengths = Lengths(seqs);
  seqs[1]->dists[0].probs[0] += 0.5f;  // no longer sums to 1
  VerifyBatchOutput out;
  absl::Status st = t.backend->ForwardVerify(Passes(seqs), Blocks(seqs), &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  seqs[1]->dists[0].probs[0] -= 0.5f;
  seqs[0]->n_logits = 1;  // a block of k = 2 needs 3 rows
  st = t.backend->ForwardVerify(Passes(seqs), Blocks(seqs), &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i]->kv.length, lengths[i]);
  for (auto& s : seqs) t.backend->kv_pool().Release(s->kv);
}

// --- CUDA -----------------------------------------------------------------

TEST(CudaForwardVerify, IsForwardThenTheCpuVerifyAndCopiesBackOnlyK) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  LoadedModel t = Target("cuda");
  ASSERT_NE(t.backend, nullptr);
  EXPECT_EQ(t.backend->verify_location(), "cuda");
  for (uint32_t seed : {1u, 2u, 3u, 4u}) {
    ExpectForwardVerifyIsForwardThenVerify(*t.backend, seed, {4, 0, -1, 8, 2, 16, 1});
  }
  // Every sequence verified: accepted, next token and K flags each, nothing
  // of the [K + 1, vocab] rows.
  const int32_t V = t.backend->config().vocab;
  const std::vector<int> ks = {8, 8, 3, 16};
  auto seqs = MakeBatch(*t.backend, 9, ks);
  const int64_t before = t.backend->verify_bytes_to_host();
  VerifyBatchOutput out;
  ASSERT_TRUE(t.backend->ForwardVerify(Passes(seqs), Blocks(seqs), &out).ok());
  const int64_t B = static_cast<int64_t>(ks.size()), max_k = 16;
  EXPECT_EQ(out.bytes_to_host, B * (2 * sizeof(int32_t) + max_k));
  EXPECT_EQ(t.backend->verify_bytes_to_host() - before, out.bytes_to_host);
  EXPECT_LT(out.bytes_to_host * 1000, B * (max_k + 1) * V * static_cast<int64_t>(sizeof(float)));
  EXPECT_TRUE(out.logits.empty());
  EXPECT_GT(out.verify_seconds, 0.0);
  for (auto& s : seqs) t.backend->kv_pool().Release(s->kv);
}

// The CUDA backend with its verify step moved to the host (Forward + the
// CPU Verify), everything else its own: the reference for the device step.
class HostVerified final : public Backend {
 public:
  explicit HostVerified(Backend& inner) : inner_(inner) {}
  absl::Status Forward(absl::Span<const ForwardSeq> batch, std::vector<float>* logits) override {
    return inner_.Forward(batch, logits);
  }
  absl::Status ForwardVerify(absl::Span<const ForwardSeq> batch, absl::Span<const VerifyInput* const> verify,
                             VerifyBatchOutput* out) override {
    return ForwardVerifyOnHost(*this, batch, verify, out);
  }
  std::string verify_location() const override { return "cpu"; }
  absl::Status ForwardSample(absl::Span<const ForwardSeq> batch, absl::Span<const DraftSampleInput* const> sample,
                             SampleBatchOutput* out) override {
    return inner_.ForwardSample(batch, sample, out);
  }
  std::string sample_location() const override { return inner_.sample_location(); }
  KvPool& kv_pool() override { return inner_.kv_pool(); }
  const ModelConfig& config() const override { return inner_.config(); }
  std::string name() const override { return inner_.name() + " with host verify"; }

 private:
  Backend& inner_;
};

std::vector<TokenId> Generate(Backend& target, Backend* draft, v1::Drafter kind, const SamplingParams& sp) {
  SessionSpec spec;
  spec.prompt = {1, 100, 200, 300, 400, 500, 600, 700};
  spec.max_new_tokens = 64;
  spec.target = sp;
  spec.draft.temperature = sp.temperature;
  std::vector<TokenId> out;
  LoopOptions opts;
  opts.k = KPolicy::Fixed(4);
  opts.on_tokens = [&](absl::Span<const TokenId> t) {
    out.insert(out.end(), t.begin(), t.end());
    return true;
  };
  auto st = GenerateInProcess(target, draft, kind, spec, opts);
  EXPECT_TRUE(st.ok()) << st.status();
  return out;
}

TEST(CudaForwardVerify, GreedyEqualsPlainAndSampledEqualsTheHostVerifier) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  LoadedModel t = Target("cuda");
  ASSERT_NE(t.backend, nullptr);
  BackendOptions opts;
  opts.kind = "cuda";
  LoadedModel d = LoadModel(ModelPath("code-draft-1m"), opts);
  ASSERT_NE(d.backend, nullptr);
  HostVerified host(*t.backend);
  const std::vector<TokenId> plain = Generate(*t.backend, nullptr, v1::DRAFTER_NONE, {});
  EXPECT_EQ(Generate(*t.backend, d.backend.get(), v1::DRAFTER_MODEL, {}), plain);
  for (uint64_t seed : {7u, 8u, 9u}) {
    SamplingParams sp;
    sp.temperature = 0.8f;
    sp.top_k = 50;
    sp.seed = seed;
    const std::vector<TokenId> on_device = Generate(*t.backend, d.backend.get(), v1::DRAFTER_MODEL, sp);
    EXPECT_EQ(on_device, Generate(host, d.backend.get(), v1::DRAFTER_MODEL, sp)) << "seed " << seed;
    EXPECT_EQ(on_device.size(), 64u);
  }
  EXPECT_EQ(t.backend->kv_pool().used_blocks(), 0);
}

}  // namespace
}  // namespace specserve::testing
