// The CPU paged attention (kernels/cpu_attention.h) against a plain
// double-precision softmax(q k / sqrt(d)) v over the same shuffled paged
// cache, for decode, verify and prefill shapes, block sizes 1..32, head
// dimensions with and without a vector tail and grouped queries; then batch
// invariance (a token's output has the same bits whatever tokens come with
// it, however the KV heads are split) and the AVX2 and AVX-512 builds giving
// the same bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu_attention.h"
#include "kernels/cpu_attention_avx512.h"
#include "kernels/cpu_matmul_avx512.h"

namespace specserve {
namespace {

struct Shape {
  int32_t n_head, n_head_kv, head_dim, block_size, len, n_new;
};

// One sequence of `len` cached positions in shuffled blocks of a pool with
// spare blocks; the last n_new positions are the pass's query tokens.
struct Case {
  Shape s;
  std::vector<float> k, v, k_cpu, q;  // k: [slot][kv_dim] (the plain layout the reference reads)
  std::vector<int32_t> table, positions;
};

Case MakeCase(const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  Case c{s, {}, {}, {}, {}, {}, {}};
  const int32_t blocks = (s.len + s.block_size - 1) / s.block_size, pool = blocks + 3;
  const int64_t kv_dim = int64_t{s.n_head_kv} * s.head_dim;
  c.k.resize(pool * s.block_size * kv_dim);
  c.v.resize(c.k.size());
  for (float& f : c.k) f = dist(rng);
  for (float& f : c.v) f = dist(rng);
  c.k_cpu.assign(c.k.size(), std::nanf(""));
  for (int64_t slot = 0; slot < pool * s.block_size; ++slot) {
    cpu::StoreKeys(c.k.data() + slot * kv_dim, s.n_head_kv, s.head_dim, s.block_size, slot / s.block_size,
                   static_cast<int32_t>(slot % s.block_size), c.k_cpu.data());
  }
  std::vector<int32_t> perm(pool);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  c.table.assign(perm.begin(), perm.begin() + blocks);
  for (int32_t p = s.len - s.n_new; p < s.len; ++p) c.positions.push_back(p);
  c.q.resize(int64_t{s.n_new} * s.n_head * s.head_dim);
  for (float& f : c.q) f = 0.5f * dist(rng);
  return c;
}

using AttentionFn = void (*)(const cpu::PagedAttentionArgs&, int64_t, int64_t, float*);

// Tokens [t0, t0 + T) of the case, KV heads split at `split`.
std::vector<float> Attend(const Case& c, int64_t t0, int64_t T, int32_t split = 0,
                       AttentionFn fn = cpu::PagedAttention) {
  const Shape& s = c.s;
  const int64_t q_dim = int64_t{s.n_head} * s.head_dim;
  std::vector<float> out(T * q_dim, std::nanf(""));
  cpu::PagedAttentionArgs a{c.q.data() + t0 * q_dim, c.positions.data() + t0, T, c.k_cpu.data(), c.v.data(),
                            c.table.data(), s.n_head, s.n_head_kv, s.head_dim, s.block_size,
                            1.0f / std::sqrt(static_cast<float>(s.head_dim)), out.data()};
  std::vector<float> scratch(cpu::PagedAttentionScratch(a));
  if (split > 0 && split < s.n_head_kv) {
    fn(a, 0, split, scratch.data());
    fn(a, split, s.n_head_kv, scratch.data());
  } else {
    fn(a, 0, s.n_head_kv, scratch.data());
  }
  return out;
}

// Plain attention in double over the plain-layout cache.
std::vector<double> Reference(const Case& c) {
  const Shape& s = c.s;
  const int64_t kv_dim = int64_t{s.n_head_kv} * s.head_dim, q_dim = int64_t{s.n_head} * s.head_dim;
  const int32_t group = s.n_head / s.n_head_kv;
  std::vector<double> out(int64_t{s.n_new} * q_dim, 0.0);
  auto slot = [&](int32_t p) { return int64_t{c.table[p / s.block_size]} * s.block_size + p % s.block_size; };
  for (int32_t t = 0; t < s.n_new; ++t) {
    const int32_t keys = c.positions[t] + 1;
    for (int32_t h = 0; h < s.n_head; ++h) {
      const int64_t kvo = int64_t{h / group} * s.head_dim;
      const float* q = c.q.data() + t * q_dim + int64_t{h} * s.head_dim;
      std::vector<double> p(keys);
      double m = -INFINITY;
      for (int32_t i = 0; i < keys; ++i) {
        double dot = 0;
        for (int32_t d = 0; d < s.head_dim; ++d) dot += double{q[d]} * c.k[slot(i) * kv_dim + kvo + d];
        p[i] = dot / std::sqrt(static_cast<double>(s.head_dim));
        m = std::max(m, p[i]);
      }
      double z = 0;
      for (double& x : p) z += (x = std::exp(x - m));
      for (int32_t i = 0; i < keys; ++i) {
        for (int32_t d = 0; d < s.head_dim; ++d) {
          out[t * q_dim + int64_t{h} * s.head_dim + d] += p[i] / z * c.v[slot(i) * kv_dim + kvo + d];
        }
      }
    }
  }
  return out;
}

const Shape kShapes[] = {
    {6, 2, 48, 16, 300, 1},   // code-target-7m decoding
    {6, 2, 48, 16, 300, 5},   // a verify pass
    {48, 16, 48, 16, 257, 9}, // the inflated ~1B target
    {4, 4, 32, 16, 430, 2},   // one query per KV head
    {8, 2, 40, 7, 90, 17},    // a head dimension with an 8-float tail, blocks of 7
    {4, 1, 4, 1, 40, 3},      // tiny heads, one-position blocks
    {12, 3, 64, 32, 70, 70},  // prefill, blocks of 32
    {2, 2, 20, 16, 33, 12},   // a 4-float tail
};

TEST(CpuAttention, MatchesPlainAttentionInDouble) {
  uint32_t seed = 1;
  for (const Shape& s : kShapes) {
    const Case c = MakeCase(s, seed++);
    const std::vector<float> got = Attend(c, 0, s.n_new);
    const std::vector<double> want = Reference(c);
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << "element " << i;
      worst = std::max(worst, std::abs(got[i] - want[i]));
    }
    EXPECT_LT(worst, 2e-5) << "heads " << s.n_head << "/" << s.n_head_kv << " hd " << s.head_dim << " bs "
                           << s.block_size << " T " << s.n_new;
  }
}

TEST(CpuAttention, ATokensOutputHasTheSameBitsWhateverComesWithIt) {
  uint32_t seed = 100;
  for (const Shape& s : kShapes) {
    const Case c = MakeCase(s, seed++);
    const int64_t q_dim = int64_t{s.n_head} * s.head_dim;
    const std::vector<float> all = Attend(c, 0, s.n_new);
    // Each token alone (one-token decoding), and the pass's tokens split in
    // two with the KV heads split across two calls.
    for (int32_t t = 0; t < s.n_new; ++t) {
      const std::vector<float> one = Attend(c, t, 1);
      ASSERT_EQ(0, std::memcmp(one.data(), all.data() + t * q_dim, q_dim * sizeof(float)))
          << "token " << t << " of " << s.n_new << ", hd " << s.head_dim << " bs " << s.block_size;
    }
    const int64_t half = s.n_new / 2;
    if (half > 0) {
      const std::vector<float> tail = Attend(c, half, s.n_new - half, s.n_head_kv / 2);
      ASSERT_EQ(0, std::memcmp(tail.data(), all.data() + half * q_dim, tail.size() * sizeof(float)));
    }
  }
}

TEST(CpuAttention, TheAvx2AndAvx512BuildsGiveTheSameBits) {
  if (!cpu::UseAvx512MatMul()) GTEST_SKIP() << "this CPU runs only the AVX2 build";
  uint32_t seed = 200;
  for (const Shape& s : kShapes) {
    const Case c = MakeCase(s, seed++);
    const std::vector<float> wide = Attend(c, 0, s.n_new, 0, cpu::PagedAttentionAvx512);
    const std::vector<float> narrow = Attend(c, 0, s.n_new, 0, cpu::PagedAttentionAvx2);
    ASSERT_EQ(0, std::memcmp(wide.data(), narrow.data(), wide.size() * sizeof(float)))
        << "hd " << s.head_dim << " bs " << s.block_size << " T " << s.n_new;
  }
}

}  // namespace
}  // namespace specserve
