// Every kernel op on every backend present against its CPU reference
// (llama.cpp's test-backend-ops): fresh random inputs per run, outputs
// poisoned (NaN) before each run, relative error bounds per precision. The
// verify-and-resample kernel must give exactly the CPU reference's tokens.
// Then the CUDA backend against golden.json and against the CPU backend.
//
// The "cpu" backend runs the reference itself (a check of the harness); the
// "cuda" backend exists when the build has CUDA, and its cases skip with
// "no CUDA device" where the machine has none.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/backend.h"
#include "common/cpu_matmul.h"
#include "common/fp16.h"
#include "common/rng.h"
#include "common/sampling.h"
#include "common/thread_pool.h"
#include "common/verify.h"
#include "common/weights.h"
#include "kernels/cpu_attention.h"
#include "kernels/cpu_ops.h"
#include "kernels/glibc_expf.h"
#include "tests/test_models.h"
#include "tests/test_paths.h"

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
#include "kernels/cuda_verify.cuh"
#endif

namespace specserve {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

bool HaveDevice() {
#if defined(SPECSERVE_HAVE_CUDA)
  return cuda::DeviceCount() > 0;
#else
  return false;
#endif
}

std::vector<float> Normal(std::mt19937& rng, size_t n, float mean = 0.0f, float sd = 1.0f) {
  std::normal_distribution<float> d(mean, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

int Uniform(std::mt19937& rng, int lo, int hi) {  // [lo, hi]
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

// |got - want| <= rtol * (bound or |want|) + atol, where atol = rtol * rms(want).
// NaN (a poisoned output never written) always fails.
::testing::AssertionResult Near(const std::vector<float>& got, const std::vector<float>& want, double rtol,
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
cuda::DeviceBuffer Poisoned(size_t floats) {
  cuda::DeviceBuffer b;
  EXPECT_TRUE(b.Allocate(floats * sizeof(float)).ok());
  EXPECT_EQ(cudaMemset(b.get(), 0xFF, floats * sizeof(float)), cudaSuccess);  // all-ones: NaN
  return b;
}
std::vector<float> Host(const cuda::DeviceBuffer& b, size_t floats) {
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
OpOutput MatmulOp(bool split, bool accumulate, const std::string& backend, std::mt19937& rng) {
  const int64_t rows = Uniform(rng, 1, 1500), cols = Uniform(rng, 1, 1500);
  const int64_t T = std::vector<int64_t>{1, 2, 5, 17, 33}[rng() % 5];
  std::vector<float> w = Normal(rng, rows * cols, 0.0f, 0.05f);
  std::vector<uint16_t> w16(rows * cols);
  for (size_t i = 0; i < w.size(); ++i) {
    w16[i] = F32ToF16(w[i]);
    w[i] = F16ToF32(w16[i]);
  }
  const std::vector<float> x = Normal(rng, T * cols, 0.0f, 2.0f), y0 = Normal(rng, T * rows);
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
    cuda::KvStoreArgs a;
    a.k = dk.as<float>();
    a.v = dv.as<float>();
    a.slots = ds.as<int64_t>();
    a.T = T;
    a.kv_dim = kv_dim;
    a.k_cache = dkc.as<float>();
    a.v_cache = dvc.as<float>();
    a.num_slots = num_slots;
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

OpOutput AttentionOp(AttnMode mode, const std::string& backend, std::mt19937& rng) {
  const int32_t n_head_kv = Uniform(rng, 1, 4), group = std::vector<int>{1, 2, 3, 4, 8, 12}[rng() % 6];
  const int32_t n_head = n_head_kv * group;
  const int32_t head_dim = std::vector<int>{4, 32, 48, 64, 128, 256}[rng() % 6];
  const int32_t block_size = std::vector<int>{1, 7, 16, 32}[rng() % 4];
  const int32_t n_seqs = mode == AttnMode::kLong ? Uniform(rng, 1, 2) : Uniform(rng, 1, 6);
  const int32_t max_len = mode == AttnMode::kLong ? 2048 : mode == AttnMode::kPrefill ? 200 : 300;
  std::vector<int32_t> lens(n_seqs), n_new(n_seqs);
  int32_t total_blocks = 0;
  for (int32_t s = 0; s < n_seqs; ++s) {
    lens[s] = Uniform(rng, 1, max_len);
    n_new[s] = mode == AttnMode::kPrefill ? lens[s]
               : mode == AttnMode::kVerify ? std::min(lens[s], Uniform(rng, 2, 17))
                                           : 1;
    total_blocks += (lens[s] + block_size - 1) / block_size;
  }
  total_blocks += 3;  // unused blocks in the pool
  std::vector<int32_t> perm(total_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  const int64_t kv_dim = int64_t{n_head_kv} * head_dim, q_dim = int64_t{n_head} * head_dim;
  const std::vector<float> k_cache = Normal(rng, int64_t{total_blocks} * block_size * kv_dim);
  const std::vector<float> v_cache = Normal(rng, int64_t{total_blocks} * block_size * kv_dim);
  std::vector<int32_t> tables, table_offset, positions, token_seq;
  int32_t used = 0, max_keys = 1;
  for (int32_t s = 0; s < n_seqs; ++s) {
    table_offset.push_back(static_cast<int32_t>(tables.size()));
    const int32_t nb = (lens[s] + block_size - 1) / block_size;
    for (int32_t b = 0; b < nb; ++b) tables.push_back(perm[used++]);
    for (int32_t j = lens[s] - n_new[s]; j < lens[s]; ++j) {
      positions.push_back(j);
      token_seq.push_back(s);
    }
    max_keys = std::max(max_keys, lens[s]);
  }
  const int64_t T = static_cast<int64_t>(positions.size());
  const std::vector<float> q = Normal(rng, T * q_dim, 0.0f, 0.5f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));

  auto reference = [&](std::vector<float>& out) {
    out.assign(T * q_dim, kNaN);
    int64_t first = 0;
    for (int32_t s = 0; s < n_seqs; ++s) {
      cpu::PagedAttentionArgs a{q.data() + first * q_dim, positions.data() + first, n_new[s], k_cache.data(),
                                v_cache.data(), tables.data() + table_offset[s], n_head, n_head_kv, head_dim,
                                block_size, scale, out.data() + first * q_dim};
      std::vector<float> scratch(cpu::PagedAttentionScratch(a));
      cpu::PagedAttention(a, 0, n_head_kv, scratch.data());
      first += n_new[s];
    }
  };
  OpOutput o;
  o.rtol = 2e-5;
  reference(o.want);
  if (backend == "cpu") reference(o.got);
#if defined(SPECSERVE_HAVE_CUDA)
  if (backend == "cuda") {
    auto dq = Dev(q), dpos = Dev(positions), dseq = Dev(token_seq), dtab = Dev(tables), doff = Dev(table_offset);
    auto dk = Dev(k_cache), dv = Dev(v_cache);
    auto dout = Poisoned(T * q_dim);
    cuda::DeviceBuffer ws;
    EXPECT_TRUE(ws.Allocate(cuda::PagedAttentionWorkspaceBytes(T, n_head, n_head_kv, head_dim, max_keys)).ok());
    cuda::PagedAttentionArgs a;
    a.q = dq.as<float>();
    a.positions = dpos.as<int32_t>();
    a.token_seq = dseq.as<int32_t>();
    a.block_tables = dtab.as<int32_t>();
    a.table_offset = doff.as<int32_t>();
    a.T = T;
    a.max_keys = max_keys;
    a.k_cache = dk.as<float>();
    a.v_cache = dv.as<float>();
    a.n_head = n_head;
    a.n_head_kv = n_head_kv;
    a.head_dim = head_dim;
    a.block_size = block_size;
    a.scale = scale;
    a.out = dout.as<float>();
    a.workspace = ws.get();
    a.workspace_bytes = ws.bytes();
    const absl::Status st = cuda::LaunchPagedAttention(a, nullptr);
    EXPECT_TRUE(st.ok()) << st;
    o.got = Host(dout, T * q_dim);
  }
#endif
  return o;
}

// --- Verify: random cases -------------------------------------------------

struct VerifyCase {
  std::vector<float> logits;  // [k + 1, vocab]
  int32_t vocab = 0;
  std::vector<int32_t> tokens;
  std::vector<SparseDist> dists;
  SamplingParams params;
  uint64_t first_position = 0;
  VerifyInput Input() const {
    return VerifyInput{logits.data(), vocab, static_cast<int32_t>(tokens.size()), tokens.data(), dists.data(),
                       params, first_position};
  }
};

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

struct OpEntry {
  const char* name;
  OpFn run;         // float ops
  int repeats = 4;  // fresh random inputs per repeat
};

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
      {"kv_store", [](B b, R r) { return KvStoreOp(b, r); }},
      {"attention_decode", [](B b, R r) { return AttentionOp(AttnMode::kDecode, b, r); }, 8},
      {"attention_verify", [](B b, R r) { return AttentionOp(AttnMode::kVerify, b, r); }, 8},
      {"attention_prefill", [](B b, R r) { return AttentionOp(AttnMode::kPrefill, b, r); }},
      {"attention_long", [](B b, R r) { return AttentionOp(AttnMode::kLong, b, r); }},
      {"verify_resample", nullptr, 1},
  };
}

std::vector<std::string> BackendsPresent() {
  std::vector<std::string> b = {"cpu"};
#if defined(SPECSERVE_HAVE_CUDA)
  b.push_back("cuda");
#endif
  return b;
}

using OpParam = std::tuple<std::string, std::string>;  // op, backend

class BackendOpsTest : public ::testing::TestWithParam<OpParam> {};

TEST_P(BackendOpsTest, MatchesCpuReference) {
  const auto& [op, backend] = GetParam();
  if (backend == "cuda" && !HaveDevice()) GTEST_SKIP() << "no CUDA device";
  std::random_device rd;  // fresh inputs every run; the seed is printed on failure
  const uint32_t seed = rd();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (const OpEntry& e : Ops()) {
    if (op != e.name) continue;
    if (!e.run) {
      VerifyParity(backend, rng);
      return;
    }
    for (int rep = 0; rep < e.repeats; ++rep) {
      const OpOutput o = e.run(backend, rng);
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
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

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

}  // namespace
}  // namespace specserve
