// The verify-and-resample kernel on every backend present against the CPU
// reference (spec/verify.h): random batches of cases whose tokens must agree
// exactly. These are the AllOps/BackendOpsTest.MatchesCpuReference/
// verify_resample_* cases; tests/cuda_ops_test.cc runs the float ops and
// tests/backend_ops_harness.h is the harness.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "spec/rng.h"
#include "spec/sampling.h"
#include "spec/verify.h"
#include "tests/backend_ops_harness.h"
#include "tests/verify_case.h"

#if defined(SPECSERVE_HAVE_CUDA)
#include "kernels/cuda_verify.cuh"
#endif

namespace specserve::testing {
namespace {

// --- Verify: random cases -------------------------------------------------

using testing::VerifyCase;

// Logit rows with the shapes that break kernels: ties (coarse grids), -inf
// entries, flat rows (large nuclei: top-p walks several chunks), peaked rows.
std::vector<float> RandomRow(std::mt19937& rng, int32_t vocab, int style) {
  std::vector<float> row = Normal(rng, vocab, 0.0f, std::vector<float>{0.05f, 1.0f, 3.0f, 8.0f}[style % 4]);
  if (style % 5 == 1) {
    for (float& x : row) x = std::round(x * 2.0f) / 2.0f;  // many exact ties
  }
  if (style % 7 == 2) {
    for (float& x : row) {
      if (rng() % 10 == 0) x = -INFINITY;
    }
  }
  if (style % 11 == 3 && vocab > 1) row[rng() % vocab] = kNaN;
  return row;
}

VerifyCase RandomVerifyCase(std::mt19937& rng, int32_t vocab) {
  VerifyCase c;
  c.vocab = vocab;
  const int32_t k = Uniform(rng, 0, rng() % 4 == 0 ? 16 : 6);
  const int style = static_cast<int>(rng() % 1000);
  const float temps[] = {0.0f, 0.3f, 0.7f, 1.0f, 1.0f, 1.5f};
  c.params.temperature = temps[rng() % 6];
  const int32_t top_ks[] = {0, 0, 1, 5, 40, std::max(1, vocab / 2), vocab + 3};
  c.params.top_k = top_ks[rng() % 7];
  const float top_ps[] = {1.0f, 1.0f, 0.95f, 0.8f, 0.5f, 0.1f, 0.999f};
  c.params.top_p = top_ps[rng() % 7];
  c.params.seed = (static_cast<uint64_t>(rng()) << 32) | rng();
  c.first_position = rng() % 5000;
  for (int32_t i = 0; i <= k; ++i) {
    const std::vector<float> row = RandomRow(rng, vocab, style);
    c.logits.insert(c.logits.end(), row.begin(), row.end());
  }
  const float draft_temp = std::vector<float>{0.0f, 0.5f, 1.0f, 1.0f}[rng() % 4];
  const int32_t top_n = std::vector<int32_t>{1, 8, 64, 64}[rng() % 4];
  const float draft_top_p = rng() % 3 == 0 ? 0.9f : 1.0f;
  for (int32_t i = 0; i < k; ++i) {
    // The draft's view of position i: the target's row i - 1... perturbed.
    std::vector<float> dl(c.logits.begin() + static_cast<size_t>(i) * vocab,
                          c.logits.begin() + static_cast<size_t>(i + 1) * vocab);
    std::normal_distribution<float> noise(0.0f, 0.7f);
    for (float& x : dl) {
      if (std::isfinite(x)) x += noise(rng);
    }
    SparseDist q = DraftDistribution(dl.data(), vocab, draft_temp, top_n, draft_top_p);
    int32_t d = SampleSparse(q, UniformFloat(c.params.seed, c.first_position + i, RngPurpose::kDraftSample));
    if (rng() % 20 == 0) d = static_cast<int32_t>(rng() % vocab);  // possibly absent from q
    c.tokens.push_back(d);
    c.dists.push_back(std::move(q));
  }
  return c;
}

// Runs batches of random cases on the backend and counts token mismatches
// with Verify; every case must agree.
void VerifyParity(const std::string& backend, std::mt19937& rng) {
  const int32_t vocabs[] = {1, 2, 7, 100, 1000, 4096, 4096, 4096, 32000};
  int checked = 0;
#if defined(SPECSERVE_HAVE_CUDA)
  cuda::DeviceVerifier verifier;
#endif
  for (int batch = 0; batch < 48; ++batch) {
    const int32_t vocab = vocabs[rng() % 9];
    std::vector<VerifyCase> cases;
    const int n = Uniform(rng, 1, 6);
    for (int i = 0; i < n; ++i) cases.push_back(RandomVerifyCase(rng, vocab));
    std::vector<VerifyInput> inputs;
    std::vector<VerifyResult> want;
    for (const VerifyCase& c : cases) {
      inputs.push_back(c.Input());
      absl::StatusOr<VerifyResult> r = Verify(inputs.back());
      ASSERT_TRUE(r.ok()) << r.status();
      want.push_back(*r);
    }
    std::vector<VerifyResult> got(n, VerifyResult{-1, -1});
    if (backend == "cpu") {
      for (int i = 0; i < n; ++i) got[i] = *Verify(inputs[i]);
    }
#if defined(SPECSERVE_HAVE_CUDA)
    if (backend == "cuda") {
      absl::StatusOr<std::vector<VerifyResult>> r = verifier.Run(inputs, nullptr);
      ASSERT_TRUE(r.ok()) << r.status();
      got = *r;
    }
#endif
    for (int i = 0; i < n; ++i) {
      const SamplingParams& p = cases[i].params;
      EXPECT_EQ(got[i].accepted, want[i].accepted)
          << "batch " << batch << " seq " << i << " vocab " << vocab << " k " << cases[i].tokens.size() << " T "
          << p.temperature << " top_k " << p.top_k << " top_p " << p.top_p;
      EXPECT_EQ(got[i].next_token, want[i].next_token)
          << "batch " << batch << " seq " << i << " vocab " << vocab << " k " << cases[i].tokens.size() << " T "
          << p.temperature << " top_k " << p.top_k << " top_p " << p.top_p;
      ++checked;
    }
  }
  EXPECT_GT(checked, 48);
}

// --- The parameterised test ----------------------------------------------

TEST_P(BackendOpsTest, MatchesCpuReference) {
  const auto& [op, backend] = GetParam();
  if (backend == "cuda" && !HaveDevice()) GTEST_SKIP() << "no CUDA device";
  std::random_device rd;  // fresh inputs every run; the seed is printed on failure
  const uint32_t seed = rd();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  ASSERT_EQ(op, "verify_resample");
  VerifyParity(backend, rng);
}

INSTANTIATE_TEST_SUITE_P(AllOps, BackendOpsTest,
                         ::testing::Combine(::testing::Values(std::string("verify_resample")),
                                            ::testing::ValuesIn(BackendsPresent())),
                         OpParamName);

}  // namespace
}  // namespace specserve::testing
