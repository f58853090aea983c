// The harness of the backend op tests (llama.cpp's test-backend-ops): every
// kernel op on every backend present against its CPU reference, with fresh
// random inputs per run, outputs poisoned (NaN) before each run and relative
// error bounds per precision.
//
// The tests share one parameterised suite, AllOps/BackendOpsTest, split over
// executables: tests/cuda_ops_test.cc (the float ops) and
// tests/cuda_verify_parity_test.cc (the verify-and-resample kernel, which must
// give exactly the CPU reference's tokens). tests/cuda_backend_test.cc checks
// the CUDA backend as a whole.
//
// The "cpu" backend runs the reference itself (a check of the harness); the
// "cuda" backend exists when the build has CUDA, and its cases skip with
// "no CUDA device" where the machine has none.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#if defined(SPECSERVE_HAVE_CUDA)
#include "kernels/cuda_util.h"
#endif

namespace specserve::testing {

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// True when a CUDA device can run the tests. Where none can, the caller
// skips, except with SPECSERVE_REQUIRE_CUDA=1 (bench/gpu.sh on the GPU
// machine), where a missing device or runtime is a test failure, so that a
// broken driver can never pass as "all tests skipped".
inline bool HaveDevice() {
  std::string why = "built without CUDA (SPECSERVE_CUDA=OFF or no nvcc)";
#if defined(SPECSERVE_HAVE_CUDA)
  if (cuda::DeviceCount(&why) > 0) return true;
#endif
  const char* require = std::getenv("SPECSERVE_REQUIRE_CUDA");
  if (require != nullptr && std::string(require) == "1") {
    ADD_FAILURE() << "SPECSERVE_REQUIRE_CUDA=1 but no CUDA device can be used: " << why;
  }
  return false;
}

inline std::vector<float> Normal(std::mt19937& rng, size_t n, float mean = 0.0f, float sd = 1.0f) {
  std::normal_distribution<float> d(mean, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

inline int Uniform(std::mt19937& rng, int lo, int hi) {  // [lo, hi]
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

// |got - want| <= rtol * (bound or |want|) + atol, where atol = rtol * rms(want).
// NaN (a poisoned output never written) always fails.
inline ::testing::AssertionResult Near(const std::vector<float>& got, const std::vector<float>& want, double rtol,
                                       const std::vector<float>* bound = nullptr) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  }
  double ss = 0.0;
  for (float w : want) ss += static_cast<double>(w) * w;
  const double atol = rtol * std::sqrt(ss / std::max<size_t>(1, want.size()));
  for (size_t i = 0; i < got.size(); ++i) {
    const double scale = bound ? (*bound)[i] : std::abs(want[i]);
    const double err = std::abs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= rtol * scale + atol)) {
      return ::testing::AssertionFailure() << "element " << i << ": got " << got[i] << ", want " << want[i]
                                           << " (tolerance " << rtol * scale + atol << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

#if defined(SPECSERVE_HAVE_CUDA)
// Test-side device helpers: upload, poisoned output, download. Failures abort
// the test through gtest assertions in the callers.
template <typename T>
cuda::DeviceBuffer Dev(const std::vector<T>& host) {
  auto b = cuda::Upload(host);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? std::move(*b) : cuda::DeviceBuffer();
}
inline cuda::DeviceBuffer Poisoned(size_t floats) {
  cuda::DeviceBuffer b;
  EXPECT_TRUE(b.Allocate(floats * sizeof(float)).ok());
  EXPECT_EQ(cudaMemset(b.get(), 0xFF, floats * sizeof(float)), cudaSuccess);  // all-ones: NaN
  return b;
}
inline std::vector<float> Host(const cuda::DeviceBuffer& b, size_t floats) {
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> h;
  EXPECT_TRUE(cuda::Download(b, floats, &h).ok());
  return h;
}
#endif

// What one op run produced: the backend's output, the reference's, and the bound.
struct OpOutput {
  std::vector<float> got, want;
  double rtol = 1e-5;
  std::vector<float> bound;  // per-element scale; empty: |want|
};

using OpFn = std::function<OpOutput(const std::string& backend, std::mt19937& rng)>;

struct OpEntry {
  const char* name;
  OpFn run;         // float ops
  int repeats = 4;  // fresh random inputs per repeat
};

// --- The parameterised suite ---------------------------------------------

inline std::vector<std::string> BackendsPresent() {
  std::vector<std::string> b = {"cpu"};
#if defined(SPECSERVE_HAVE_CUDA)
  b.push_back("cuda");
#endif
  return b;
}

using OpParam = std::tuple<std::string, std::string>;  // op, backend

class BackendOpsTest : public ::testing::TestWithParam<OpParam> {};

// The case name: op_backend.
inline std::string OpParamName(const ::testing::TestParamInfo<OpParam>& info) {
  return std::get<0>(info.param) + "_" + std::get<1>(info.param);
}

}  // namespace specserve::testing
