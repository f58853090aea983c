// The CUDA backend as a whole: against golden.json and against the CPU
// backend on ragged batches, and the clear error where no device is present.
// Also the host-side check the device verifier's exactness rests on (no GPU
// needed). The cases that need a device skip with "no CUDA device" where the
// machine has none. The per-op parity tests are tests/cuda_ops_test.cc and
// tests/cuda_verify_parity_test.cc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/make_backend.h"
#include "common/backend.h"
#include "common/weights.h"
#include "kernels/glibc_expf.h"
#include "tests/backend_ops_harness.h"
#include "tests/test_models.h"
#include "tests/test_paths.h"

namespace specserve::testing {
namespace {

// --- Host-side checks that need no GPU -----------------------------------

// testing::ModelPath: the repository's models/, else $SPECSERVE_SHARED/models
// (bench/gpu.sh runs the binaries away from the checkout they were built in).
using testing::ModelPath;

// The device verifier's exactness rests on GlibcExpf being the C library's
// expf bit for bit on the inputs the recipe produces (x <= 0) and beyond.
TEST(GlibcExpf, MatchesTheCLibrary) {
  int mismatches = 0;
  for (uint64_t u = 0; u < 0x100000000ull; u += 997) {
    const uint32_t bits = static_cast<uint32_t>(u);
    float x;
    std::memcpy(&x, &bits, sizeof(x));
    const float want = std::exp(x), got = GlibcExpf(x);
    if (std::memcmp(&want, &got, sizeof(float)) != 0 && !(std::isnan(want) && std::isnan(got))) {
      if (++mismatches < 5) ADD_FAILURE() << "expf(" << x << "): libc " << want << ", port " << got;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(CudaBackend, AbsentDeviceIsAClearError) {
  if (HaveDevice()) GTEST_SKIP() << "a CUDA device is present";
  const std::string path = ModelPath("code-draft-1m");
  if (path.empty()) GTEST_SKIP() << "code-draft-1m not present";
  auto model = Model::Load(path);
  ASSERT_TRUE(model.ok()) << model.status();
  BackendOptions opts;
  opts.kind = "cuda";
  auto backend = MakeBackend(**model, opts);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition);
#if defined(SPECSERVE_HAVE_CUDA)
  EXPECT_NE(backend.status().message().find("no CUDA device"), std::string::npos) << backend.status();
#endif
}

// --- The CUDA backend on the real models ---------------------------------

// The KV pool sized after the weights (common/kv_sizing.h): the sessions, a
// given --kv-memory-mib or --kv-blocks bind and the name says which; with
// more sessions than the device holds, the free memory binds and the
// headroom stays free.
TEST(CudaBackend, KvPoolFromFreeMemory) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  const std::string path = ModelPath("code-draft-1m");
  if (path.empty()) GTEST_SKIP() << "code-draft-1m not present";
  auto model = Model::Load(path);
  ASSERT_TRUE(model.ok()) << model.status();
  const int32_t per_context = KvPool::BlocksFor((*model)->config.n_ctx, 16);
  BackendOptions opts;
  opts.kind = "cuda";
  opts.kv_contexts = 4;
  {
    auto b = MakeCudaBackend(**model, opts);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ((*b)->kv_pool().num_blocks(), 4 * per_context);
    EXPECT_NE((*b)->name().find("--max-sessions 4 full contexts"), std::string::npos) << (*b)->name();
  }
  opts.kv_memory_mib = 1;  // given: never below one context
  {
    auto b = MakeCudaBackend(**model, opts);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ((*b)->kv_pool().num_blocks(), per_context);
    EXPECT_NE((*b)->name().find("--kv-memory-mib"), std::string::npos) << (*b)->name();
  }
  opts.kv_memory_mib = 0;
  opts.kv_blocks = 37;
  {
    auto b = MakeCudaBackend(**model, opts);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ((*b)->kv_pool().num_blocks(), 37);
    EXPECT_NE((*b)->name().find("--kv-blocks"), std::string::npos) << (*b)->name();
  }
  opts.kv_blocks = 0;
  opts.kv_contexts = 1 << 30;  // more than any device holds
  {
    auto b = MakeCudaBackend(**model, opts);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_GT((*b)->kv_pool().num_blocks(), 4 * per_context);
    EXPECT_NE((*b)->name().find("free device memory"), std::string::npos) << (*b)->name();
#if defined(SPECSERVE_HAVE_CUDA)
    size_t free_bytes = 0, total_bytes = 0;
    ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
    EXPECT_GE(free_bytes, size_t{900} << 20) << "the headroom (at least 1 GiB) should stay free";
#endif
    // The backend still runs a pass.
    KvSeq kv;
    std::vector<float> logits;
    const std::vector<TokenId> prompt = {1, 100, 200};
    ASSERT_TRUE((*b)->Forward({ForwardSeq{&kv, prompt, 1}}, &logits).ok());
    (*b)->kv_pool().Release(kv);
  }
}

class CudaGoldenTest : public ::testing::TestWithParam<std::string> {};

// tests/model_test.cc's golden check through the CUDA backend.
TEST_P(CudaGoldenTest, TopLogitsAndGreedyContinuation) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  BackendOptions opts;
  opts.kind = "cuda";
  testing::ExpectMatchesGolden(GetParam(), opts, 1e-2);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaGoldenTest,
                         ::testing::Values("code-draft-1m", "code-target-7m", "code-target-14m"),
                         testing::ModelParamName);

// The same ragged batch (with a rollback in the middle) on both backends.
TEST(CudaBackend, MatchesCpuBackendOnRaggedBatchesAndRollback) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  const std::string path = ModelPath("code-target-7m");
  if (path.empty()) GTEST_SKIP() << "code-target-7m not present";
  auto model = Model::Load(path);
  ASSERT_TRUE(model.ok()) << model.status();
  BackendOptions opts;
  opts.threads = 2;
  auto cpu = MakeCpuBackend(**model, opts);
  opts.kind = "cuda";
  auto gpu = MakeCudaBackend(**model, opts);
  ASSERT_TRUE(cpu.ok() && gpu.ok()) << gpu.status();
  const int32_t V = (*model)->config.vocab;
  std::mt19937 rng(7);
  std::vector<std::vector<TokenId>> prompts;
  for (int n : {7, 40, 1, 13, 100}) {
    std::vector<TokenId> p{1};
    for (int i = 1; i < n; ++i) p.push_back(Uniform(rng, 3, V - 1));
    prompts.push_back(p);
  }
  auto run = [&](Backend& b) {
    std::vector<KvSeq> seqs(prompts.size());
    std::vector<float> all, lg;
    std::vector<ForwardSeq> batch;
    for (size_t i = 0; i < prompts.size(); ++i) {
      batch.push_back({&seqs[i], prompts[i], static_cast<int32_t>(prompts[i].size())});
    }
    EXPECT_TRUE(b.Forward(batch, &lg).ok());
    all.insert(all.end(), lg.begin(), lg.end());
    // A verify-shaped step (5 tokens each), a rollback of 3, another step.
    std::vector<std::vector<TokenId>> step(prompts.size(), std::vector<TokenId>{5, 6, 7, 8, 9});
    for (int round = 0; round < 2; ++round) {
      batch.clear();
      for (size_t i = 0; i < prompts.size(); ++i) batch.push_back({&seqs[i], step[i], 5});
      EXPECT_TRUE(b.Forward(batch, &lg).ok());
      all.insert(all.end(), lg.begin(), lg.end());
      for (KvSeq& s : seqs) b.kv_pool().Truncate(s, s.length - 3);
    }
    for (KvSeq& s : seqs) b.kv_pool().Release(s);
    EXPECT_EQ(b.kv_pool().used_blocks(), 0);
    return all;
  };
  const std::vector<float> want = run(**cpu), got = run(**gpu);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-2 * std::max(1.0f, std::abs(want[i]))) << "row " << i / V;
  }
}

// Batch invariance on the device (tests/model_test.cc's CPU test, ported):
// a verify pass of T tokens gives each position the bits of decoding them
// one at a time, also with another sequence's tokens in the same pass.
TEST(CudaBackend, VerifyPassLogitsHaveTheBitsOfOneTokenDecoding) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  const std::string path = ModelPath("code-target-7m");
  if (path.empty()) GTEST_SKIP() << "code-target-7m not present";
  auto model = Model::Load(path);
  ASSERT_TRUE(model.ok()) << model.status();
  BackendOptions opts;
  opts.kind = "cuda";
  auto gpu = MakeCudaBackend(**model, opts);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  Backend& b = **gpu;
  const int32_t V = (*model)->config.vocab;
  std::mt19937 rng(5);
  std::vector<TokenId> tokens{1};
  for (int i = 1; i < 80; ++i) tokens.push_back(Uniform(rng, 3, V - 1));
  constexpr int kPrompt = 37;
  KvSeq one;
  std::vector<float> lg, want;
  ASSERT_TRUE(b.Forward({ForwardSeq{&one, {tokens.data(), kPrompt}, 1}}, &lg).ok());
  for (int i = kPrompt; i < 80; ++i) {
    ASSERT_TRUE(b.Forward({ForwardSeq{&one, {&tokens[i], 1}, 1}}, &lg).ok());
    want.insert(want.end(), lg.begin(), lg.end());
  }
  for (bool with_neighbour : {false, true}) {
    KvSeq many, other;
    ASSERT_TRUE(b.Forward({ForwardSeq{&many, {tokens.data(), kPrompt}, 1}}, &lg).ok());
    if (with_neighbour) ASSERT_TRUE(b.Forward({ForwardSeq{&other, {tokens.data() + 5, 20}, 0}}, &lg).ok());
    int pos = kPrompt;
    for (int T : {2, 3, 4, 5, 6, 7, 9, 7}) {
      std::vector<ForwardSeq> batch;
      const std::vector<TokenId> extra{7, 8, 9};
      if (with_neighbour) batch.push_back(ForwardSeq{&other, extra, 2});
      batch.push_back(ForwardSeq{&many, {&tokens[pos], static_cast<size_t>(T)}, T});
      ASSERT_TRUE(b.Forward(batch, &lg).ok());
      const int64_t skip = with_neighbour ? 2 * int64_t{V} : 0;
      for (int64_t i = 0; i < int64_t{T} * V; ++i) {
        ASSERT_EQ(lg[skip + i], want[(pos - kPrompt) * int64_t{V} + i])
            << (with_neighbour ? "with a neighbour, " : "") << "pass of " << T << " at position " << pos + i / V;
      }
      pos += T;
    }
    ASSERT_EQ(pos, 80);
    for (KvSeq* k : {&many, &other}) b.kv_pool().Release(*k);
  }
  b.kv_pool().Release(one);
}

}  // namespace
}  // namespace specserve::testing
