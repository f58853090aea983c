#include "tools/dot_peak.h"

#include <immintrin.h>

#include <vector>

#include "kernels/cpu_matmul_int8.h"
#include "tools/memory_traffic.h"

namespace specserve::cli {
namespace {

constexpr int kChains = 12;      // more than vpdpbusd's latency x issue width
constexpr int kAvx2Chains = 6;   // acc and codes of each in 12 of the 16 ymm
constexpr int64_t kSteps = 1 << 20;

// kSteps x kChains vpdpbusd on zmm; returns a sum so nothing is dropped.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) int64_t VnniChains() {
  __m512i acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_epi32(i);
  __m512i a = _mm512_set1_epi8(3);
  const __m512i b = _mm512_set1_epi8(5);
  for (int64_t s = 0; s < kSteps; ++s) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
    asm volatile("" : "+v"(a));  // a is unknown each step: nothing is hoisted
  }
  int64_t sum = 0;
  for (int i = 0; i < kChains; ++i) {
    alignas(64) int32_t lanes[16];
    _mm512_store_si512(lanes, acc[i]);
    for (int32_t v : lanes) sum += v;
  }
  return sum;
}

// 2 kSteps x kAvx2Chains AVX2 dots (vpmaddubsw, vpmaddwd by 1, vpaddd) on ymm, each
// chain with its own codes so that no product is shared.
__attribute__((target("avx2"))) int64_t Avx2Chains() {
  __m256i acc[kAvx2Chains], w[kAvx2Chains];
  for (int i = 0; i < kAvx2Chains; ++i) {
    acc[i] = _mm256_set1_epi32(i);
    w[i] = _mm256_set1_epi8(static_cast<char>(i + 1));
  }
  const __m256i q = _mm256_set1_epi8(5), ones = _mm256_set1_epi16(1);
  for (int64_t s = 0; s < kSteps * 2; ++s) {
#pragma GCC unroll 6
    for (int i = 0; i < kAvx2Chains; ++i) {
      acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(w[i], q), ones));
    }
    asm volatile("" : "+x"(w[0]), "+x"(w[1]), "+x"(w[2]), "+x"(w[3]), "+x"(w[4]), "+x"(w[5]));
  }
  int64_t sum = 0;
  for (int i = 0; i < kAvx2Chains; ++i) {
    alignas(32) int32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc[i]);
    for (int32_t v : lanes) sum += v;
  }
  return sum;
}

}  // namespace

int64_t MatrixMacsPerToken(const ModelWeights& w) {
  int64_t total = 0;
  for (const MatrixView* m : TokenMatrices(w)) total += m->rows * m->cols;
  return total;
}

DotPeak MeasureInt8DotPeak(int threads) {
  DotPeak peak;
  int64_t macs_per_call = 0;
  int64_t (*chains)() = nullptr;
  if (cpu::UseVnniInt8MatMul()) {
    peak.instruction = "vpdpbusd zmm";
    macs_per_call = kSteps * kChains * 64;
    chains = VnniChains;
  } else if (__builtin_cpu_supports("avx2")) {
    peak.instruction = "vpmaddubsw+vpmaddwd+vpaddd ymm";
    macs_per_call = kSteps * 2 * kAvx2Chains * 32;
    chains = Avx2Chains;
  } else {
    return peak;
  }
  std::vector<int64_t> sums(threads);
  const double s = FastestParallelRun(threads, 3, [&](int t) { sums[t] = chains(); });
  peak.gmacs_per_s = macs_per_call * threads / s / 1e9;
  volatile int64_t keep = sums[0];
  (void)keep;
  return peak;
}

}  // namespace specserve::cli
