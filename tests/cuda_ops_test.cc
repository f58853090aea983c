// Every float kernel op on every backend present against its CPU reference
// (llama.cpp's test-backend-ops): the AllOps/BackendOpsTest cases but
// verify_resample, which tests/cuda_verify_parity_test.cc runs. The harness
// (tolerances, device helpers, the suite) is tests/backend_ops_harness.h.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/fp16.h"
#include "common/thread_pool.h"
#include "common/weights.h"
#include "kernels/cpu_attention.h"
#include "kernels/cpu_matmul.h"
#include "kernels/cpu_ops.h"
#include "tests/backend_ops_harness.h"
#include "tests/traced_rng.h"

#if defined(SPECSERVE_HAVE_CUDA)
#include "kernels/cuda_add.cuh"
#include "kernels/cuda_attention.cuh"
#include "kernels/cuda_embedding.cuh"
#include "kernels/cuda_kv_store.cuh"
#include "kernels/cuda_matmul.cuh"
#include "kernels/cuda_rmsnorm.cuh"
#include "kernels/cuda_rope.cuh"
#include "kernels/cuda_swiglu.cuh"
#include "kernels/cuda_util.h"
#endif

namespace specserve::testing {
namespace {

// --- The ops ---------------------------------------------------------------

OpOutput RmsNormOp(const std::string& backend, std::mt19937& rng) {
  const int64_t T = Uniform(rng, 1, 9), n = Uniform(rng, 1, 5000);
  const std::vector<float> x = Normal(rng, T * n, 0.0f, 3.0f), w = Normal(rng, n, 1.0f, 0.2f);
  OpOutput o;
  o.want.assign(T * n, kNaN);
  cpu::RmsNorm(x.data(), w.data(), o.want.data(), T, n, 1e-5f);
  if (backend == "cpu") {
    o.got.assign(T * n, kNaN);
    cpu::RmsNorm(x.data(), w.data(), o.got.data(), T, n, 1e-5f);
  }
#if defined(SPECSERVE_HAVE_CUDA)
  if (backend == "cuda") {
    auto dx = Dev(x), dw = Dev(w);
    auto dy = Poisoned(T * n);
    EXPECT_TRUE(cuda::LaunchRmsNorm({dx.as<float>(), dw.as<float>(), dy.as<float>(), T, n, 1e-5f}, nullptr).ok());
    o.got = Host(dy, T * n);
  }
#endif
  return o;
}

OpOutput RopeOp(bool neox, const std::string& backend, std::mt19937& rng) {
  const int32_t head_dim = 2 * Uniform(rng, 2, 64);
  const int32_t rope_dim = rng() % 4 == 0 ? 2 * Uniform(rng, 1, head_dim / 2) : head_dim;
  // Sometimes Llama 3.1 frequency divisors and linear scaling.
  std::vector<float> factors;
  if (rng() % 2) {
    for (int i = 0; i < rope_dim / 2; ++i) factors.push_back(std::vector<float>{1.0f, 1.0f, 4.0f, 8.0f, 2.5f}[rng() % 5]);
  }
  cpu::RopeParams p{Uniform(rng, 1, 8), head_dim, rope_dim, rng() % 2 ? 10000.0f : 500000.0f, neox,
                    factors.empty() ? nullptr : factors.data(), rng() % 3 == 0 ? 0.25f : 1.0f};
  const int64_t T = Uniform(rng, 1, 20), width = int64_t{p.n_heads} * p.head_dim;
  const std::vector<float> x = Normal(rng, T * width);
  std::vector<int32_t> pos(T);
  for (auto& q : pos) q = Uniform(rng, 0, 8191);
  OpOutput o;
  o.want = x;  // in place: the input is the output, so it is not poisoned
  cpu::Rope(o.want.data(), pos.data(), T, p);
  if (backend == "cpu") {
    o.got = x;
    cpu::Rope(o.got.data(), pos.data(), T, p);
  }
#if defined(SPECSERVE_HAVE_CUDA)
  if (backend == "cuda") {
    auto dx = Dev(x), dp = Dev(pos), df = Dev(factors);
    if (!factors.empty()) p.freq_factors = df.as<float>();  // the device copy
    EXPECT_TRUE(cuda::LaunchRope({dx.as<float>(), dp.as<int32_t>(), T, 0, p}, nullptr).ok());
    o.got = Host(dx, T * width);
  }
#endif
  return o;
}

OpOutput SwiGluOp(const std::string& backend, std::mt19937& rng) {
  const int64_t n = Uniform(rng, 1, 100000);
  const std::vector<float> g = Normal(rng, n, 0.0f, 4.0f), u = Normal(rng, n);
  OpOutput o;
  o.want.assign(n, kNaN);
  cpu::SwiGlu(g.data(), u.data(), o.want.data(), n);
  if (backend == "cpu") {
    o.got.assign(n, kNaN);
    cpu::SwiGlu(g.data(), u.data(), o.got.data(), n);
  }
#if defined(SPECSERVE_HAVE_CUDA)
  if (backend == "cuda") {
    auto dg = Dev(g), du = Dev(u);
    auto dy = Poisoned(n);
    EXPECT_TRUE(cuda::LaunchSwiGlu({dg.as<float>(), du.as<float>(), dy.as<float>(), n}, nullptr).ok());
    o.got = Host(dy, n);
  }
#endif
  return o;
}

OpOutput AddOp(bool bias, const std::string& backend, std::mt19937& rng) {
  const int64_t T = Uniform(rng, 1, 9), n = Uniform(rng, 1, 3000);
  const std::vector<float> y = Normal(rng, T * n), x = Normal(rng, bias ? n : T * n);
  OpOutput o;
  o.rtol = 0.0;  // one fp32 addition: exact
  o.want = y;
  bias ? cpu::AddBias(o.want.data(), x.data(), T, n) : cpu::AddInPlace(o.want.data(), x.data(), T * n);
  if (backend == "cpu") {
    o.got = y;
    bias ? cpu::AddBias(o.got.data(), x.data(), T, n) : cpu::AddInPlace(o.got.data(), x.data(), T * n);
  }
#if defined(SPECSERVE_HAVE_CUDA)
  if (backend == "cuda") {
    auto dy = Dev(y), dx = Dev(x);
    EXPECT_TRUE(cuda::LaunchAdd({dy.as<float>(), dx.as<float>(), T, n, bias}, nullptr).ok());
    o.got = Host(dy, T * n);
  }
#endif
  return o;
}

OpOutput EmbeddingOp(bool f16, const std::string& backend, std::mt19937& rng) {
  const int64_t rows = Uniform(rng, 1, 5000), cols = Uniform(rng, 1, 700), T = Uniform(rng, 1, 40);
  const std::vector<float> table = Normal(rng, rows * cols);
  std::vector<uint16_t> table16(rows * cols);
  for (size_t i = 0; i < table.size(); ++i) table16[i] = F32ToF16(table[i]);
  std::vector<int32_t> ids(T);
  for (auto& id : ids) id = Uniform(rng, 0, static_cast<int>(rows - 1));
  const MatrixView view{f16 ? GgmlType::kF16 : GgmlType::kF32,
                        f16 ? reinterpret_cast<const uint8_t*>(table16.data())
                            : reinterpret_cast<const uint8_t*>(table.data()),
                        rows, cols, static_cast<uint64_t>(cols * (f16 ? 2 : 4))};
  OpOutput o;
  o.rtol = 0.0;  // a widening copy: exact
  o.want.assign(T * cols, kNaN);
  for (int64_t t = 0; t < T; ++t) DequantizeMatrixRow(view, ids[t], o.want.data() + t * cols);
  if (backend == "cpu") {
    o.got.assign(T * cols, kNaN);
    for (int64_t t = 0; t < T; ++t) DequantizeMatrixRow(view, ids[t], o.got.data() + t * cols);
  }
#if defined(SPECSERVE_HAVE_CUDA)
  if (backend == "cuda") {
    auto dt = f16 ? Dev(table16) : Dev(table);
    auto di = Dev(ids);
    auto dy = Poisoned(T * cols);
    cuda::EmbeddingArgs a;
    a.table = dt.get();
    a.type = view.type;
    a.rows = rows;
    a.cols = cols;
    a.ids = di.as<int32_t>();
    a.T = T;
    a.out = dy.as<float>();
    EXPECT_TRUE(cuda::LaunchEmbedding(a, nullptr).ok());
    o.got = Host(dy, T * cols);
  }
#endif
  return o;
}

// f16 weights; the bound is sum_k |w_rk x_tk| (the scale of the rounding).
// huge: activations beyond f16's range (|x| >= 65520 in every row) through
// the cuBLAS path (T > kFixedOrderMaxTokens): scaled rows keep them finite.
OpOutput MatmulOp(bool split, bool accumulate, const std::string& backend, std::mt19937& rng, bool huge = false) {
  const int64_t rows = Uniform(rng, 1, 1500), cols = Uniform(rng, 1, 1500);
  const int64_t T = huge ? 40 : std::vector<int64_t>{1, 2, 5, 17, 33, 32, 64}[rng() % 7];
  std::vector<float> w = Normal(rng, rows * cols, 0.0f, 0.05f);
  std::vector<uint16_t> w16(rows * cols);
  for (size_t i = 0; i < w.size(); ++i) {
    w16[i] = F32ToF16(w[i]);
    w[i] = F16ToF32(w16[i]);
  }
  std::vector<float> x = Normal(rng, T * cols, 0.0f, 2.0f);
  const std::vector<float> y0 = Normal(rng, T * rows);
  if (huge) {
    for (int64_t t = 0; t < T; ++t) x[t * cols + t % cols] = (t % 2 ? -1.0f : 1.0f) * 70000.0f * (1 + t);
  }
  const MatrixView view{GgmlType::kF16, reinterpret_cast<const uint8_t*>(w16.data()), rows, cols,
                        static_cast<uint64_t>(cols * 2)};
  ThreadPool pool(2);
  OpOutput o;
  o.rtol = split ? 2e-4 : 3e-3;
  o.want.assign(T * rows, kNaN);
  MatMul(view, x.data(), T, o.want.data(), pool);
  o.bound.assign(T * rows, 0.0f);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0.0;
      for (int64_t k = 0; k < cols; ++k) s += std::abs(w[r * cols + k] * x[t * cols + k]);
      o.bound[t * rows + r] = static_cast<float>(s + (accumulate ? std::abs(y0[t * rows + r]) : 0.0));
      if (accumulate) o.want[t * rows + r] += y0[t * rows + r];
    }
  }
  if (backend == "cpu") {
    o.got.assign(T * rows, kNaN);
    MatMul(view, x.data(), T, o.got.data(), pool);
    if (accumulate) {
      for (size_t i = 0; i < o.got.size(); ++i) o.got[i] += y0[i];
    }
    o.rtol = 1e-6;
  }
#if defined(SPECSERVE_HAVE_CUDA)
  if (backend == "cuda") {
    cublasHandle_t h = nullptr;
    EXPECT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    const auto precision = split ? cuda::MatmulPrecision::kSplitF16 : cuda::MatmulPrecision::kF16;
    auto dw = Dev(w16), dx = Dev(x);
    auto dy = accumulate ? Dev(y0) : Poisoned(T * rows);
    cuda::DeviceBuffer ws;
    EXPECT_TRUE(ws.Allocate(cuda::MatmulWorkspaceBytes(T, rows, cols, precision)).ok());
    cuda::MatmulArgs a;
    a.w = dw.get();
    a.rows = rows;
    a.cols = cols;
    a.x = dx.as<float>();
    a.T = T;
    a.y = dy.as<float>();
    a.accumulate = accumulate;
    a.precision = precision;
    a.workspace = ws.get();
    a.workspace_bytes = ws.bytes();
    a.handle = h;
    const absl::Status st = cuda::LaunchMatmul(a, nullptr);
    EXPECT_TRUE(st.ok()) << st;
    o.got = Host(dy, T * rows);
    cublasDestroy(h);
  }
#endif
  return o;
}

OpOutput KvStoreOp(const std::string& backend, std::mt19937& rng) {
  const int64_t kv_dim = 4 * Uniform(rng, 1, 128), num_slots = Uniform(rng, 16, 512);
  const int64_t T = Uniform(rng, 1, static_cast<int>(num_slots));
  std::vector<int64_t> slots(num_slots);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(T);
  const std::vector<float> k = Normal(rng, T * kv_dim), v = Normal(rng, T * kv_dim);
  const std::vector<float> cache0 = Normal(rng, num_slots * kv_dim);
  auto reference = [&](std::vector<float>& kc, std::vector<float>& vc) {
    for (int64_t t = 0; t < T; ++t) {
      std::copy_n(k.data() + t * kv_dim, kv_dim, kc.data() + slots[t] * kv_dim);
      std::copy_n(v.data() + t * kv_dim, kv_dim, vc.data() + slots[t] * kv_dim);
    }
  };
  OpOutput o;
  o.rtol = 0.0;
  std::vector<float> kc = cache0, vc = cache0;
  reference(kc, vc);
  o.want = kc;
  o.want.insert(o.want.end(), vc.begin(), vc.end());
  if (backend == "cpu") {
    std::vector<float> kg = cache0, vg = cache0;
    reference(kg, vg);
    o.got = kg;
    o.got.insert(o.got.end(), vg.begin(), vg.end());
  }
#if defined(SPECSERVE_HAVE_CUDA)
  if (backend == "cuda") {
    auto dk = Dev(k), dv = Dev(v), ds = Dev(slots), dkc = Dev(cache0), dvc = Dev(cache0);
    const cuda::KvStoreArgs a{.k = dk.as<float>(), .v = dv.as<float>(), .slots = ds.as<int64_t>(), .T = T,
                              .kv_dim = kv_dim, .k_cache = dkc.as<float>(), .v_cache = dvc.as<float>(),
                              .num_slots = num_slots};
    EXPECT_TRUE(cuda::LaunchKvStore(a, nullptr).ok());
    o.got = Host(dkc, num_slots * kv_dim);
    const std::vector<float> vg = Host(dvc, num_slots * kv_dim);
    o.got.insert(o.got.end(), vg.begin(), vg.end());
  }
#endif
  return o;
}

// A ragged batch of sequences over one shuffled paged cache. `mode` picks the
// query tokens per sequence: decode (1), verify (K+1) or prefill (all).
enum class AttnMode { kDecode, kVerify, kPrefill, kLong };

// The inputs of one paged-attention call: random head shapes, a batch of
// sequences whose blocks sit shuffled in one cache (with unused blocks too),
// and the query tokens of each (its last n_new[s] positions).
struct PagedBatch {
  int32_t n_head_kv = 0, n_head = 0, head_dim = 0, block_size = 0, n_seqs = 0;
  std::vector<int32_t> lens, n_new;
  std::vector<float> k_cache, v_cache;
  std::vector<int32_t> tables, table_offset, positions, token_seq;
  int32_t max_keys = 1;
  int64_t T = 0, q_dim = 0;
  std::vector<float> q;
  float scale = 0.0f;
};

// The sequences' lengths and new tokens; the blocks they need in total.
int32_t RandomLengths(AttnMode mode, std::mt19937& rng, PagedBatch& b) {
  b.n_seqs = mode == AttnMode::kLong ? Uniform(rng, 1, 2) : Uniform(rng, 1, 6);
  const int32_t max_len = mode == AttnMode::kLong ? 2048 : mode == AttnMode::kPrefill ? 200 : 300;
  b.lens.resize(b.n_seqs);
  b.n_new.resize(b.n_seqs);
  int32_t total_blocks = 0;
  for (int32_t s = 0; s < b.n_seqs; ++s) {
    b.lens[s] = Uniform(rng, 1, max_len);
    b.n_new[s] = mode == AttnMode::kPrefill ? b.lens[s]
                 : mode == AttnMode::kVerify ? std::min(b.lens[s], Uniform(rng, 2, 17))
                                             : 1;
    total_blocks += (b.lens[s] + b.block_size - 1) / b.block_size;
  }
  return total_blocks;
}

// Each sequence's block table (shuffled blocks of the pool), and the
// position and sequence of every query token.
void LayOutTables(const std::vector<int32_t>& perm, PagedBatch& b) {
  int32_t used = 0;
  for (int32_t s = 0; s < b.n_seqs; ++s) {
    b.table_offset.push_back(static_cast<int32_t>(b.tables.size()));
    const int32_t nb = (b.lens[s] + b.block_size - 1) / b.block_size;
    for (int32_t blk = 0; blk < nb; ++blk) b.tables.push_back(perm[used++]);
    for (int32_t j = b.lens[s] - b.n_new[s]; j < b.lens[s]; ++j) {
      b.positions.push_back(j);
      b.token_seq.push_back(s);
    }
    b.max_keys = std::max(b.max_keys, b.lens[s]);
  }
}

PagedBatch RandomPagedBatch(AttnMode mode, std::mt19937& rng) {
  PagedBatch b;
  b.n_head_kv = Uniform(rng, 1, 4);
  b.n_head = b.n_head_kv * std::vector<int>{1, 2, 3, 4, 8, 12}[rng() % 6];
  b.head_dim = std::vector<int>{4, 32, 48, 64, 128, 256}[rng() % 6];
  b.block_size = std::vector<int>{1, 7, 16, 32}[rng() % 4];
  const int32_t total_blocks = RandomLengths(mode, rng, b) + 3;  // unused blocks in the pool
  std::vector<int32_t> perm(total_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  const int64_t kv_dim = int64_t{b.n_head_kv} * b.head_dim;
  b.q_dim = int64_t{b.n_head} * b.head_dim;
  b.k_cache = Normal(rng, int64_t{total_blocks} * b.block_size * kv_dim);
  b.v_cache = Normal(rng, int64_t{total_blocks} * b.block_size * kv_dim);
  LayOutTables(perm, b);
  b.T = static_cast<int64_t>(b.positions.size());
  b.q = Normal(rng, b.T * b.q_dim, 0.0f, 0.5f);
  b.scale = 1.0f / std::sqrt(static_cast<float>(b.head_dim));
  return b;
}

// The CPU kernel, one sequence at a time (its key cache transposed per
// block, cpu::StoreKeys; the device's is b.k_cache's layout).
std::vector<float> ReferenceAttention(const PagedBatch& b) {
  std::vector<float> out(b.T * b.q_dim, kNaN);
  const int64_t kv_dim = int64_t{b.n_head_kv} * b.head_dim;
  std::vector<float> k_cpu(b.k_cache.size());
  for (int64_t slot = 0; slot < static_cast<int64_t>(b.k_cache.size()) / kv_dim; ++slot) {
    cpu::StoreKeys(b.k_cache.data() + slot * kv_dim, b.n_head_kv, b.head_dim, b.block_size, slot / b.block_size,
                   static_cast<int32_t>(slot % b.block_size), k_cpu.data());
  }
  int64_t first = 0;
  for (int32_t s = 0; s < b.n_seqs; ++s) {
    cpu::PagedAttentionArgs a{b.q.data() + first * b.q_dim, b.positions.data() + first, b.n_new[s],
                              k_cpu.data(), b.v_cache.data(), b.tables.data() + b.table_offset[s],
                              b.n_head, b.n_head_kv, b.head_dim, b.block_size, b.scale, out.data() + first * b.q_dim};
    std::vector<float> scratch(cpu::PagedAttentionScratch(a));
    cpu::PagedAttention(a, 0, b.n_head_kv, scratch.data());
    first += b.n_new[s];
  }
  return out;
}

#if defined(SPECSERVE_HAVE_CUDA)
// The CUDA kernel, the whole batch in one launch.
std::vector<float> CudaAttention(const PagedBatch& b) {
  auto dq = Dev(b.q), dpos = Dev(b.positions), dseq = Dev(b.token_seq), dtab = Dev(b.tables),
       doff = Dev(b.table_offset);
  auto dk = Dev(b.k_cache), dv = Dev(b.v_cache);
  auto dout = Poisoned(b.T * b.q_dim);
  cuda::DeviceBuffer ws;
  EXPECT_TRUE(
      ws.Allocate(cuda::PagedAttentionWorkspaceBytes(b.T, b.n_head, b.n_head_kv, b.head_dim, b.max_keys)).ok());
  const cuda::PagedAttentionArgs a{
      .q = dq.as<float>(), .positions = dpos.as<int32_t>(), .token_seq = dseq.as<int32_t>(),
      .block_tables = dtab.as<int32_t>(), .table_offset = doff.as<int32_t>(), .T = b.T, .max_keys = b.max_keys,
      .k_cache = dk.as<float>(), .v_cache = dv.as<float>(), .n_head = b.n_head, .n_head_kv = b.n_head_kv,
      .head_dim = b.head_dim, .block_size = b.block_size, .scale = b.scale, .out = dout.as<float>(),
      .workspace = ws.get(), .workspace_bytes = ws.bytes()};
  const absl::Status st = cuda::LaunchPagedAttention(a, nullptr);
  EXPECT_TRUE(st.ok()) << st;
  return Host(dout, b.T * b.q_dim);
}
#endif

OpOutput AttentionOp(AttnMode mode, const std::string& backend, std::mt19937& rng) {
  const PagedBatch batch = RandomPagedBatch(mode, rng);
  OpOutput o;
  o.rtol = 2e-5;
  o.want = ReferenceAttention(batch);
  if (backend == "cpu") o.got = ReferenceAttention(batch);
#if defined(SPECSERVE_HAVE_CUDA)
  if (backend == "cuda") o.got = CudaAttention(batch);
#endif
  return o;
}

// --- The parameterised test ----------------------------------------------

std::vector<OpEntry> Ops() {
  using B = const std::string&;
  using R = std::mt19937&;
  return {
      {"rmsnorm", [](B b, R r) { return RmsNormOp(b, r); }},
      {"rope", [](B b, R r) { return RopeOp(false, b, r); }},
      {"rope_neox", [](B b, R r) { return RopeOp(true, b, r); }},
      {"swiglu", [](B b, R r) { return SwiGluOp(b, r); }},
      {"add", [](B b, R r) { return AddOp(false, b, r); }},
      {"add_bias", [](B b, R r) { return AddOp(true, b, r); }},
      {"embedding_f16", [](B b, R r) { return EmbeddingOp(true, b, r); }},
      {"embedding_f32", [](B b, R r) { return EmbeddingOp(false, b, r); }},
      {"matmul_split_f16", [](B b, R r) { return MatmulOp(true, false, b, r); }},
      {"matmul_split_f16_accumulate", [](B b, R r) { return MatmulOp(true, true, b, r); }},
      {"matmul_f16", [](B b, R r) { return MatmulOp(false, false, b, r); }},
      {"matmul_split_f16_beyond_f16_range", [](B b, R r) { return MatmulOp(true, true, b, r, true); }},
      {"matmul_f16_beyond_f16_range", [](B b, R r) { return MatmulOp(false, false, b, r, true); }},
      {"kv_store", [](B b, R r) { return KvStoreOp(b, r); }},
      {"attention_decode", [](B b, R r) { return AttentionOp(AttnMode::kDecode, b, r); }, 8},
      {"attention_verify", [](B b, R r) { return AttentionOp(AttnMode::kVerify, b, r); }, 8},
      {"attention_prefill", [](B b, R r) { return AttentionOp(AttnMode::kPrefill, b, r); }},
      {"attention_long", [](B b, R r) { return AttentionOp(AttnMode::kLong, b, r); }},
  };
}

TEST_P(BackendOpsTest, MatchesCpuReference) {
  const auto& [op, backend] = GetParam();
  if (backend == "cuda" && !HaveDevice()) GTEST_SKIP() << "no CUDA device";
  TracedRng rng;  // fresh inputs every run; the seed is printed on failure
  for (const OpEntry& e : Ops()) {
    if (op != e.name) continue;
    for (int rep = 0; rep < e.repeats; ++rep) {
      const OpOutput o = e.run(backend, rng.get());
      EXPECT_TRUE(Near(o.got, o.want, o.rtol, o.bound.empty() ? nullptr : &o.bound)) << op << " repeat " << rep;
    }
  }
}

std::vector<std::string> OpNames() {
  std::vector<std::string> n;
  for (const OpEntry& e : Ops()) n.push_back(e.name);
  return n;
}

INSTANTIATE_TEST_SUITE_P(AllOps, BackendOpsTest,
                         ::testing::Combine(::testing::ValuesIn(OpNames()), ::testing::ValuesIn(BackendsPresent())),
                         OpParamName);

}  // namespace
}  // namespace specserve::testing
