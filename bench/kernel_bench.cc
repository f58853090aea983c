// Kernel microbenchmarks (Google Benchmark): the CPU matmul at the verify
// shapes of code-target-7m (one FFN matrix, 768 x 288, f16 and f32; the
// lm_head, 4096 x 288) for T = 1..17 tokens, the quantized matrices of a ~1B
// model with fp32 (BM_QuantMatMul) and int8 (BM_QuantMatMulInt8) activations,
// and paged attention at a depth of 430. Prints Google Benchmark's table; --benchmark_format=json for JSON.
// A benchmark, not a test: it asserts nothing.
//
//   build/bin/specserve-kernel-bench --benchmark_filter=MatMul
#include <benchmark/benchmark.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "common/fp16.h"
#include "kernels/cpu_attention.h"
#include "kernels/cpu_matmul.h"
#include "common/tensor_types.h"
#include "kernels/cpu_matmul_packed.h"

namespace specserve {
namespace {

struct Matrix {
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> packed;  // Q8_0 / Q4_K / Q6_K under int8 activations, as the CPU backend packs them
  MatrixView view;
};

Matrix RandomMatrix(GgmlType type, int64_t rows, int64_t cols) {
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.f, 0.05f);
  Matrix m;
  const size_t elem = type == GgmlType::kF16 ? 2 : 4;
  m.bytes.resize(rows * cols * elem);
  for (int64_t i = 0; i < rows * cols; ++i) {
    const float v = dist(rng);
    if (type == GgmlType::kF16) {
      const uint16_t h = F32ToF16(v);
      std::memcpy(m.bytes.data() + 2 * i, &h, 2);
    } else {
      std::memcpy(m.bytes.data() + 4 * i, &v, 4);
    }
  }
  m.view = MatrixView{type, m.bytes.data(), rows, cols, static_cast<uint64_t>(cols * elem)};
  return m;
}

// Args: {T, rows, cols, f16?}
void BM_MatMul(benchmark::State& state) {
  const int64_t T = state.range(0), rows = state.range(1), cols = state.range(2);
  const Matrix w = RandomMatrix(state.range(3) ? GgmlType::kF16 : GgmlType::kF32, rows, cols);
  std::vector<float> x(T * cols, 0.5f), y(T * rows);
  ThreadPool pool(1);
  for (auto _ : state) {
    MatMul(w.view, x.data(), T, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GMAC/s"] = benchmark::Counter(static_cast<double>(T * rows * cols) * state.iterations(),
                                                benchmark::Counter::kIsRate);
  state.counters["us/token"] = benchmark::Counter(static_cast<double>(T) * state.iterations(),
                                                  benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_MatMul)
    ->ArgNames({"T", "rows", "cols", "f16"})
    ->ArgsProduct({{1, 2, 3, 4, 5, 6, 9, 17}, {768}, {288}, {1, 0}})
    ->ArgsProduct({{1, 3, 5, 9}, {4096}, {288}, {1}})
    ->Unit(benchmark::kMicrosecond);

// A random quantized matrix in ggml's block layout: random quants with every
// f16 scale field set to a small finite value.
Matrix RandomQuantMatrix(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  Matrix m;
  const uint64_t row_bytes = RowBytes(type, cols);
  m.bytes.resize(rows * row_bytes);
  for (auto& b : m.bytes) b = static_cast<uint8_t>(rng());
  const uint16_t d = F32ToF16(0.01f);
  // Block size in bytes and the offsets of its f16 scales.
  struct Layout { size_t block; std::vector<size_t> halves; };
  const Layout l = type == GgmlType::kQ8_0 ? Layout{34, {0}}
                 : type == GgmlType::kQ5_0 ? Layout{22, {0}}
                 : type == GgmlType::kQ4_K ? Layout{144, {0, 2}}
                                           : Layout{210, {208}};  // Q6_K
  for (size_t off = 0; off + l.block <= m.bytes.size(); off += l.block) {
    for (size_t h : l.halves) std::memcpy(m.bytes.data() + off + h, &d, 2);
  }
  m.view = MatrixView{type, m.bytes.data(), rows, cols, row_bytes};
  return m;
}

// Args: {T, type, rows, cols, threads}: one pass of T tokens through a
// matrix of a ~1B model (n_embd 2304, n_ff 8192), cycling through copies that
// together exceed the L3 cache, so the weights stream from memory as in
// decoding. "GB/s" is weight bytes read per second (compare with the
// machine's read bandwidth); us/pass is what a verify pass of T tokens costs.
void RunQuantMatMul(benchmark::State& state, MatMulActivations activations, bool hot = false) {
  const int64_t T = state.range(0), rows = state.range(2), cols = state.range(3);
  const auto type = static_cast<GgmlType>(state.range(1));
  const int64_t bytes = rows * static_cast<int64_t>(RowBytes(type, cols));
  const int copies = hot ? 1 : static_cast<int>(std::max<int64_t>(1, (96 << 20) / bytes));
  std::vector<Matrix> ws;
  for (int c = 0; c < copies; ++c) ws.push_back(RandomQuantMatrix(type, rows, cols, c + 1));
  if (activations == MatMulActivations::kInt8 && cpu::PackableForInt8(ws[0].view)) {
    for (Matrix& m : ws) {
      m.packed.resize(cpu::PackedBytes(m.view));
      cpu::PackForInt8(m.view, m.packed.data());
      m.view.packed = m.packed.data();
    }
  }
  std::vector<float> x(T * cols), y(T * rows);
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.f, 1.f);
  for (float& f : x) f = dist(rng);
  ThreadPool pool(static_cast<int>(state.range(4)));
  int c = 0;
  for (auto _ : state) {
    MatMul(ws[c].view, x.data(), T, y.data(), pool, activations);
    benchmark::DoNotOptimize(y.data());
    c = (c + 1) % copies;
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(bytes) * state.iterations() / 1e9,
                                              benchmark::Counter::kIsRate);
  state.counters["us/pass"] = benchmark::Counter(static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
void BM_QuantMatMul(benchmark::State& state) { RunQuantMatMul(state, MatMulActivations::kFp32); }
// The same with int8 activations (kernels/cpu_matmul_int8.h).
void BM_QuantMatMulInt8(benchmark::State& state) { RunQuantMatMul(state, MatMulActivations::kInt8); }
// The same on one small matrix that stays in L2: the arithmetic alone, what
// a pass of T tokens costs once memory is not the limit.
void BM_QuantMatMulInt8Hot(benchmark::State& state) { RunQuantMatMul(state, MatMulActivations::kInt8, true); }

constexpr int kQ8_0 = static_cast<int>(GgmlType::kQ8_0), kQ5_0 = static_cast<int>(GgmlType::kQ5_0),
              kQ4_K = static_cast<int>(GgmlType::kQ4_K), kQ6_K = static_cast<int>(GgmlType::kQ6_K);
BENCHMARK(BM_QuantMatMul)
    ->ArgNames({"T", "type", "rows", "cols", "threads"})
    ->ArgsProduct({{1, 2, 5, 9, 17, 64}, {kQ8_0, kQ4_K, kQ6_K, kQ5_0}, {8192}, {2304}, {1}})
    ->ArgsProduct({{1, 2, 5, 9, 17, 64}, {kQ8_0, kQ4_K, kQ6_K}, {2304}, {8192}, {1}})
    ->ArgsProduct({{1, 5, 9}, {kQ8_0, kQ4_K}, {8192}, {2304}, {2}})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_QuantMatMulInt8)
    ->ArgNames({"T", "type", "rows", "cols", "threads"})
    ->ArgsProduct({{1, 2, 3, 4, 5, 6, 7, 8, 9, 17, 33, 64, 128}, {kQ8_0, kQ4_K, kQ6_K, kQ5_0}, {8192}, {2304}, {1}})
    ->ArgsProduct({{1, 2, 3, 4, 5, 9, 17, 33, 64, 128}, {kQ8_0, kQ4_K, kQ6_K}, {2304}, {8192}, {1}})
    ->ArgsProduct({{1, 5, 9}, {kQ8_0, kQ4_K}, {8192}, {2304}, {2}})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_QuantMatMulInt8Hot)
    ->ArgNames({"T", "type", "rows", "cols", "threads"})
    ->ArgsProduct({{1, 2, 3, 5, 9, 17}, {kQ8_0, kQ4_K, kQ6_K}, {512}, {2048}, {1}})
    ->Unit(benchmark::kMicrosecond);

// Args: {T, depth, heads, kv_heads, head_dim}: T new tokens after `depth`
// cached ones, 16-token blocks; 6/2/48 is code-target-7m, 4/4/32 the draft,
// 48/16/48 the inflated ~1B target.
void BM_PagedAttention(benchmark::State& state) {
  const int32_t T = static_cast<int32_t>(state.range(0)), depth = static_cast<int32_t>(state.range(1));
  const int32_t kHeads = static_cast<int32_t>(state.range(2)), kKvHeads = static_cast<int32_t>(state.range(3));
  const int32_t kHeadDim = static_cast<int32_t>(state.range(4));
  constexpr int32_t kBlock = 16;
  const int32_t len = depth + T, blocks = (len + kBlock - 1) / kBlock;
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> k(blocks * kBlock * kKvHeads * kHeadDim), v(k.size()), q(T * kHeads * kHeadDim),
      out(q.size());
  for (float& f : k) f = dist(rng);
  for (float& f : v) f = dist(rng);
  for (float& f : q) f = dist(rng);
  std::vector<int32_t> table(blocks), positions(T);
  for (int32_t b = 0; b < blocks; ++b) table[b] = b;
  for (int32_t t = 0; t < T; ++t) positions[t] = depth + t;
  cpu::PagedAttentionArgs a;
  a.q = q.data();
  a.k_cache = k.data();
  a.v_cache = v.data();
  a.out = out.data();
  a.block_table = table.data();
  a.positions = positions.data();
  a.T = T;
  a.n_head = kHeads;
  a.n_head_kv = kKvHeads;
  a.head_dim = kHeadDim;
  a.block_size = kBlock;
  a.scale = 1.f / std::sqrt(static_cast<float>(kHeadDim));
  std::vector<float> scratch(cpu::PagedAttentionScratch(a));
  for (auto _ : state) {
    cpu::PagedAttention(a, 0, kKvHeads, scratch.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["us/token"] = benchmark::Counter(static_cast<double>(T) * state.iterations(),
                                                  benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  // Multiply-adds of q.k and p.v over the keys each token sees.
  const double macs = 2.0 * kHeads * kHeadDim * (static_cast<double>(T) * depth + T * (T + 1) / 2.0);
  state.counters["GMAC/s"] = benchmark::Counter(macs * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PagedAttention)
    ->ArgNames({"T", "depth", "heads", "kv", "hd"})
    ->ArgsProduct({{1, 3, 5, 9}, {430}, {6}, {2}, {48}})
    ->ArgsProduct({{1, 2, 5}, {430}, {4}, {4}, {32}})
    ->ArgsProduct({{1, 5, 9, 17}, {256}, {48}, {16}, {48}})  // the inflated ~1B target (llama-1b), one layer
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace specserve

BENCHMARK_MAIN();
