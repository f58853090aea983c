// GPU benchmark, run by bench/gpu.sh (SPECSERVE_BENCH=1); skipped otherwise
// and where there is no CUDA device. It measures what docs/performance_model.md
// is about, on synthetic models with the matrix shapes of
// Llama-3.1-8B and Llama-3.2-1B (random f16 weights: timing does not depend
// on the values) and on the real small models:
//   - device copy bandwidth and the decode floor (weight bytes / bandwidth),
//   - plain decode ms/token (one-token Forward, logits to the host),
//   - the verify pass for K+1 = 1, 2, 4, 8, 16 tokens (K+1 logits rows to
//     the host, then a rollback: a truncate),
//   - the verify-and-resample kernel for V = 4096 and 128256.
//   - the small trained pair inflated to those shapes (tools/inflate.h):
//     decode, verify, and greedy speculative decoding against plain decoding.
// Prints one table.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/make_backend.h"
#include "common/backend.h"
#include "common/weights.h"
#include "tests/backend_ops_harness.h"
#include "tests/test_paths.h"
#include "tools/inflate.h"
#include <nlohmann/json.hpp>

#if defined(SPECSERVE_HAVE_CUDA)
#include "kernels/cuda_util.h"
#include "kernels/cuda_verify.cuh"
#endif

namespace specserve {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

int32_t Argmax(const float* row, int32_t n) { return static_cast<int32_t>(std::max_element(row, row + n) - row); }

// Plain greedy decoding of n tokens after the prompt; ms covers the decode
// steps only (not the prefill).
std::vector<TokenId> PlainGreedy(Backend& t, const std::vector<TokenId>& prompt, int n, double* ms) {
  KvSeq seq;
  std::vector<float> lg;
  EXPECT_TRUE(t.Forward({ForwardSeq{&seq, prompt, 1}}, &lg).ok());
  std::vector<TokenId> out = {Argmax(lg.data(), t.config().vocab)};
  const auto t0 = Clock::now();
  while (static_cast<int>(out.size()) < n) {
    const TokenId in[1] = {out.back()};
    EXPECT_TRUE(t.Forward({ForwardSeq{&seq, in, 1}}, &lg).ok());
    out.push_back(Argmax(lg.data(), t.config().vocab));
  }
  *ms = Ms(Clock::now() - t0) * n / std::max(1, n - 1);  // per-token cost times n
  t.kv_pool().Release(seq);
  return out;
}

// Greedy speculative decoding as in docs/round_protocol.md "The round" (no overlap: draft and
// target take turns on one device): the draft proposes K tokens, the target
// verifies [pending, d1..dK] in one pass, both roll back to the committed
// length. Returns the first n tokens; *acceptance = accepted / proposed.
std::vector<TokenId> SpecGreedy(Backend& target, Backend& draft, const std::vector<TokenId>& prompt, int n, int K,
                                double* ms, double* acceptance) {
  const int32_t V = target.config().vocab;
  KvSeq ts, ds;
  std::vector<float> lg;
  const std::vector<TokenId> head(prompt.begin(), prompt.end() - 1);
  EXPECT_TRUE(target.Forward({ForwardSeq{&ts, head, 0}}, &lg).ok());
  EXPECT_TRUE(draft.Forward({ForwardSeq{&ds, head, 0}}, &lg).ok());
  TokenId pending = prompt.back();
  std::vector<TokenId> draft_feed = {pending}, out;
  int64_t proposed = 0, accepted = 0;
  const auto t0 = Clock::now();
  while (static_cast<int>(out.size()) < n) {
    const int32_t draft_len = ds.length;
    std::vector<TokenId> d, feed = draft_feed;
    for (int i = 0; i < K; ++i) {
      EXPECT_TRUE(draft.Forward({ForwardSeq{&ds, feed, 1}}, &lg).ok());
      d.push_back(Argmax(lg.data(), V));
      feed = {d.back()};
    }
    std::vector<TokenId> block = {pending};
    block.insert(block.end(), d.begin(), d.end());
    const int32_t target_len = ts.length;
    EXPECT_TRUE(target.Forward({ForwardSeq{&ts, block, K + 1}}, &lg).ok());
    int m = 0;
    while (m < K && Argmax(lg.data() + static_cast<size_t>(m) * V, V) == d[m]) ++m;
    const TokenId x = Argmax(lg.data() + static_cast<size_t>(m) * V, V);
    out.insert(out.end(), d.begin(), d.begin() + m);
    out.push_back(x);
    proposed += K;
    accepted += m;
    target.kv_pool().Truncate(ts, target_len + 1 + m);
    draft.kv_pool().Truncate(ds, draft_len + static_cast<int32_t>(draft_feed.size()) + std::min(m, K - 1));
    draft_feed = m == K ? std::vector<TokenId>{d[K - 1], x} : std::vector<TokenId>{x};
    pending = x;
  }
  *ms = Ms(Clock::now() - t0);
  *acceptance = proposed > 0 ? static_cast<double>(accepted) / proposed : 0.0;
  target.kv_pool().Release(ts);
  draft.kv_pool().Release(ds);
  out.resize(n);
  return out;
}

std::string ModelFile(const std::string& name) {
  std::string path = testing::BundledModel(name + ".gguf");  // else $SPECSERVE_SHARED/models
  if (!std::ifstream(path).good()) path = testing::SharedPath("models/" + name + ".gguf");
  return path;
}

std::vector<TokenId> Prompt() {
  const std::string golden = testing::GoldenPath("golden.json");
  if (!golden.empty()) {
    std::ifstream in(golden);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (!j.is_discarded() && j.contains("prompts") && !j["prompts"].empty()) {
      return j["prompts"][0]["ids"].get<std::vector<TokenId>>();
    }
  }
  std::vector<TokenId> ids = {1};
  for (int i = 1; i < 24; ++i) ids.push_back(100 + (i * 37) % 3000);
  return ids;
}

// The loop above on the CPU backend with the small pair: speculative greedy
// output equals plain greedy output token for token (checks the benchmark's
// bookkeeping; runs everywhere).
TEST(SpeculativeLoop, GreedyEqualsPlainOnTheCpu) {
  const std::string tp = ModelFile("code-target-7m"), dp = ModelFile("code-draft-1m");
  if (tp.empty() || dp.empty()) GTEST_SKIP() << "models not present";
  auto t = Model::Load(tp);
  auto d = Model::Load(dp);
  ASSERT_TRUE(t.ok() && d.ok());
  BackendOptions opts;
  opts.threads = 2;
  auto target = MakeCpuBackend(**t, opts);
  auto draft = MakeCpuBackend(**d, opts);
  ASSERT_TRUE(target.ok() && draft.ok());
  const std::vector<TokenId> prompt = Prompt();
  double ms = 0.0, acc = 0.0;
  const std::vector<TokenId> plain = PlainGreedy(**target, prompt, 24, &ms);
  for (int K : {1, 4}) {
    EXPECT_EQ(SpecGreedy(**target, **draft, prompt, 24, K, &ms, &acc), plain) << "K " << K;
    EXPECT_GT(acc, 0.3) << "K " << K;
    EXPECT_EQ((*target)->kv_pool().used_blocks(), 0);
    EXPECT_EQ((*draft)->kv_pool().used_blocks(), 0);
  }
}

#if defined(SPECSERVE_HAVE_CUDA)

// A model with the given shape whose matrices all view one buffer of random
// f16 values (the backend uploads each matrix separately).
struct SyntheticModel {
  std::vector<uint16_t> f16;  // shared matrix storage
  std::vector<float> ones;    // norm gains
  Model model;
};

std::unique_ptr<SyntheticModel> MakeSynthetic(const std::string& name, int32_t n_embd, int32_t n_layer,
                                              int32_t n_head, int32_t n_head_kv, int32_t head_dim, int32_t n_ff,
                                              int32_t vocab, bool tied) {
  auto s = std::make_unique<SyntheticModel>();
  ModelConfig& c = s->model.config;
  c.arch = "llama";
  c.name = name;
  c.vocab = vocab;
  c.n_embd = n_embd;
  c.n_layer = n_layer;
  c.n_head = n_head;
  c.n_head_kv = n_head_kv;
  c.head_dim = head_dim;
  c.n_ff = n_ff;
  c.n_ctx = 2048;
  c.rope_dim = head_dim;
  c.rope_base = 500000.f;
  c.tied_output = tied;
  const int64_t biggest = std::max<int64_t>(int64_t{vocab} * n_embd, int64_t{n_ff} * n_embd);
  s->f16.resize(biggest);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (uint16_t& h : s->f16) {  // small random halves in [-0.03, 0.03]
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    h = static_cast<uint16_t>(0x2000u + ((x >> 33) & 0x7ffu)) | static_cast<uint16_t>(((x >> 60) & 1u) << 15);
  }
  s->ones.assign(std::max(n_embd, n_ff), 1.0f);
  auto view = [&](int64_t rows, int64_t cols) {
    return MatrixView{GgmlType::kF16, reinterpret_cast<const uint8_t*>(s->f16.data()), rows, cols,
                      static_cast<uint64_t>(cols * 2)};
  };
  ModelWeights& w = s->model.weights;
  w.tok_embd = view(vocab, n_embd);
  w.output = tied ? w.tok_embd : view(vocab, n_embd);
  w.output_norm = s->ones.data();
  w.layers.resize(n_layer);
  for (LayerWeights& L : w.layers) {
    L.attn_norm = s->ones.data();
    L.ffn_norm = s->ones.data();
    L.wq = view(c.q_dim(), n_embd);
    L.wk = view(c.kv_dim(), n_embd);
    L.wv = view(c.kv_dim(), n_embd);
    L.wo = view(n_embd, c.q_dim());
    L.gate = view(n_ff, n_embd);
    L.up = view(n_ff, n_embd);
    L.down = view(n_embd, n_ff);
  }
  return s;
}

// Bytes a one-token decode must read: every layer matrix and the output matrix.
double DecodeWeightBytes(const ModelConfig& c) {
  const double d = c.n_embd;
  const double layer = d * c.q_dim() * 2 + d * c.kv_dim() * 2 + 3.0 * d * c.n_ff;
  return 2.0 * (layer * c.n_layer + d * c.vocab);
}

// Milliseconds of device time for `reps` calls of enqueue() on the default
// stream, timed with CUDA events.
template <typename Fn>
float DeviceMs(int reps, Fn enqueue) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0);
  for (int i = 0; i < reps; ++i) enqueue();
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0.0f;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return ms;
}

// Device-to-device copy bandwidth, counting the bytes read and written.
double CopyBandwidth() {
  const size_t bytes = size_t{2} << 30;
  cuda::DeviceBuffer a, b;
  if (!a.Allocate(bytes).ok() || !b.Allocate(bytes).ok()) return 0.0;
  cudaMemcpy(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice);  // warm-up
  const int reps = 10;
  const float ms = DeviceMs(reps, [&] { cudaMemcpy(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice); });
  return 2.0 * bytes * reps / (ms * 1e-3);
}

struct Row {
  std::string name;
  double gb = 0.0, floor_ms = 0.0, decode_ms = 0.0;
  std::vector<double> verify_ms;  // K+1 = 1, 2, 4, 8, 16
};

const int kVerifySizes[] = {1, 2, 4, 8, 16};

absl::StatusOr<std::unique_ptr<Backend>> Upload(const std::string& name, const Model& model) {
  BackendOptions opts;
  opts.kind = "cuda";
  opts.kv_blocks = 2 * KvPool::BlocksFor(model.config.n_ctx, opts.kv_block_size);
  const auto t0 = Clock::now();
  auto backend = MakeCudaBackend(model, opts);
  if (backend.ok()) std::fprintf(stderr, "%s: uploaded in %.1f s\n", name.c_str(), Ms(Clock::now() - t0) / 1e3);
  return backend;
}

Row Measure(const std::string& name, Backend& b, double bandwidth) {
  const ModelConfig& c = b.config();
  Row row;
  row.name = name;
  row.gb = DecodeWeightBytes(c) / 1e9;
  row.floor_ms = bandwidth > 0 ? DecodeWeightBytes(c) / bandwidth * 1e3 : 0.0;
  std::mt19937 rng(1);
  const int32_t V = c.vocab;
  auto tokens = [&](int n) {
    std::vector<TokenId> t(n);
    for (auto& x : t) x = static_cast<TokenId>(rng() % V);
    return t;
  };
  KvSeq seq;
  std::vector<float> logits;
  const std::vector<TokenId> prompt = tokens(128);
  EXPECT_TRUE(b.Forward({ForwardSeq{&seq, prompt, 1}}, &logits).ok());
  auto step = [&](int n) {
    const std::vector<TokenId> t = tokens(n);
    const absl::Status s = b.Forward({ForwardSeq{&seq, t, n}}, &logits);
    EXPECT_TRUE(s.ok()) << s;
  };
  for (int i = 0; i < 3; ++i) step(1);  // warm-up (cuBLAS heuristics, allocations)
  const int decode_steps = 32;
  auto t0 = Clock::now();
  for (int i = 0; i < decode_steps; ++i) step(1);
  row.decode_ms = Ms(Clock::now() - t0) / decode_steps;
  for (int n : kVerifySizes) {
    const int32_t committed = seq.length;
    auto verify = [&] {
      step(n);
      b.kv_pool().Truncate(seq, committed + 1);  // keep pending, roll back the drafts
      b.kv_pool().Truncate(seq, committed);
    };
    verify();
    verify();
    const int reps = 10;
    t0 = Clock::now();
    for (int i = 0; i < reps; ++i) verify();
    row.verify_ms.push_back(Ms(Clock::now() - t0) / reps);
  }
  b.kv_pool().Release(seq);
  return row;
}

// The verify-and-resample kernel alone: B = 1, K = 8, device inputs ready.
double VerifyKernelMs(int32_t vocab, const SamplingParams& params) {
  const int32_t K = 8;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(K + 1) * vocab);
  for (float& x : logits) x = nd(rng);
  std::vector<int32_t> k = {K}, draft(K), qoff(K + 1), qids(K);
  std::vector<float> qprobs(K, 1.0f);
  for (int i = 0; i < K; ++i) {  // one-hot drafts of each row's argmax: all accepted when greedy
    const float* r = logits.data() + static_cast<size_t>(i) * vocab;
    draft[i] = qids[i] = static_cast<int32_t>(std::max_element(r, r + vocab) - r);
    qoff[i] = i;
  }
  qoff[K] = K;
  std::vector<uint64_t> first = {1000};
  auto dl = cuda::Upload(logits), dk = cuda::Upload(k), dd = cuda::Upload(draft), dqo = cuda::Upload(qoff),
       dqi = cuda::Upload(qids), dqp = cuda::Upload(qprobs), dfp = cuda::Upload(first);
  auto dp = cuda::Upload(std::vector<SamplingParams>{params});
  auto dout = cuda::Upload(std::vector<int32_t>(2, 0));
  cuda::DeviceBuffer ws;
  if (!dl.ok() || !dout.ok() || !ws.Allocate(cuda::VerifyWorkspaceBytes(1, K, vocab)).ok()) return -1.0;
  cuda::VerifyBatchArgs a;
  a.logits = dl->as<float>();
  a.batch = 1;
  a.max_k = K;
  a.vocab = vocab;
  a.k = dk->as<int32_t>();
  a.draft_tokens = dd->as<int32_t>();
  a.q_offsets = dqo->as<int32_t>();
  a.q_count = qoff[K];
  a.q_ids = dqi->as<int32_t>();
  a.q_probs = dqp->as<float>();
  a.params = dp->as<SamplingParams>();
  a.first_position = dfp->as<uint64_t>();
  a.accepted = dout->as<int32_t>();
  a.next_token = a.accepted + 1;
  a.workspace = ws.get();
  a.workspace_bytes = ws.bytes();
  if (!cuda::LaunchVerifyResample(a, nullptr).ok()) return -1.0;
  const int reps = 5;
  const float ms = DeviceMs(reps, [&] { (void)cuda::LaunchVerifyResample(a, nullptr); });
  return cudaGetLastError() == cudaSuccess ? ms / reps : -1.0;
}

// Max |logit| difference between the inflated model on the device and the
// small one on the CPU, last prompt position.
double InflationError(Backend& big, const Model& small, const std::vector<TokenId>& prompt) {
  BackendOptions opts;
  opts.threads = 8;
  auto cpu = MakeCpuBackend(small, opts);
  if (!cpu.ok()) return -1.0;
  KvSeq a, b;
  std::vector<float> want, got;
  if (!(*cpu)->Forward({ForwardSeq{&a, prompt, 1}}, &want).ok() || !big.Forward({ForwardSeq{&b, prompt, 1}}, &got).ok()) {
    return -1.0;
  }
  big.kv_pool().Release(b);
  double err = 0.0;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) err = std::max(err, std::abs(double(got[i]) - want[i]));
  return err;
}

void PrintRow(FILE* out, const Row& r) {
  std::fprintf(out, "%-18s %8.2f %9.3f %10.3f |", r.name.c_str(), r.gb, r.floor_ms, r.decode_ms);
  for (double v : r.verify_ms) std::fprintf(out, " %7.3f", v);
  std::fprintf(out, "\n");
  std::fflush(out);
}

// What the benchmark prints: a row per model, then notes. Each row and note
// also goes to stderr as soon as it is measured, so a run stopped by its
// time limit still shows what it had.
struct Table {
  std::vector<Row> rows;
  std::vector<std::string> notes;
  void Add(Row row) {
    PrintRow(stderr, row);
    rows.push_back(std::move(row));
  }
  void Note(std::string note) {
    std::fprintf(stderr, "%s\n", note.c_str());
    notes.push_back(std::move(note));
  }
};

// Uploads MODEL and measures it as NAME.
void UploadAndMeasure(const std::string& name, const Model& model, double bandwidth, Table* table) {
  auto b = Upload(name, model);
  if (!b.ok()) {
    ADD_FAILURE() << name << ": " << b.status();
    return;
  }
  table->Add(Measure(name, **b, bandwidth));
}

// Synthetic models with the Llama-3.1-8B and Llama-3.2-1B shapes.
void MeasureLlamaShapes(double bandwidth, Table* table) {
  {
    auto m = MakeSynthetic("llama-3.1-8b-shape", 4096, 32, 32, 8, 128, 14336, 128256, false);
    UploadAndMeasure("8B shape, V=128k", m->model, bandwidth, table);
  }
  {
    auto m = MakeSynthetic("llama-3.2-1b-shape", 2048, 16, 32, 8, 64, 8192, 128256, true);
    UploadAndMeasure("1B shape, V=128k", m->model, bandwidth, table);
  }
}

// Greedy decoding of the inflated pair: plain, then speculative for each K.
void CompareSpeculative(Backend& target, Backend& draft, const std::vector<TokenId>& prompt, Table* table) {
  const int n = 128;
  char buf[256];
  double plain_ms = 0.0;
  const std::vector<TokenId> plain = PlainGreedy(target, prompt, n, &plain_ms);
  std::snprintf(buf, sizeof(buf), "greedy, %d tokens, 8B-shaped target: plain %.1f tok/s", n, n / plain_ms * 1e3);
  table->Note(buf);
  for (int K : {2, 4, 6, 8}) {
    double ms = 0.0, acc = 0.0;
    const std::vector<TokenId> spec = SpecGreedy(target, draft, prompt, n, K, &ms, &acc);
    const auto diverge = std::mismatch(spec.begin(), spec.end(), plain.begin()).first - spec.begin();
    std::snprintf(buf, sizeof(buf),
                  "  speculative K=%d with the 1B-shaped draft: %.1f tok/s, acceptance %.3f, speedup %.2fx, %s", K,
                  n / ms * 1e3, acc, plain_ms / ms,
                  diverge == n ? "same tokens as plain" : ("first difference at token " + std::to_string(diverge)).c_str());
    table->Note(buf);
  }
}

// The small trained pair, and the same pair inflated to the 8B / 1B shapes.
// Fatal failures return early (wrap in ASSERT_NO_FATAL_FAILURE).
void MeasureTrainedPair(double bandwidth, Table* table) {
  // The 14m target where it is present, else the 7m (the bundle a GPU device
  // call carries leaves the 14m out to stay within the 64 MiB it may carry).
  std::string target_name = "code-target-14m";
  if (!std::ifstream(ModelFile(target_name)).good()) target_name = "code-target-7m";
  const std::string target_path = ModelFile(target_name), draft_path = ModelFile("code-draft-1m");
  if (target_path.empty() || draft_path.empty()) return;
  auto small_t = Model::Load(target_path);
  auto small_d = Model::Load(draft_path);
  ASSERT_TRUE(small_t.ok() && small_d.ok());
  UploadAndMeasure(target_name, **small_t, bandwidth, table);
  UploadAndMeasure("code-draft-1m", **small_d, bandwidth, table);
  const auto t0 = Clock::now();
  auto big_t = inflate::Inflate(**small_t, inflate::Llama8BShape((*small_t)->config.head_dim));
  auto big_d = inflate::Inflate(**small_d, inflate::Llama1BShape((*small_d)->config.head_dim));
  ASSERT_TRUE(big_t.ok() && big_d.ok()) << big_t.status() << big_d.status();
  std::fprintf(stderr, "inflated in %.1f s\n", Ms(Clock::now() - t0) / 1e3);
  const std::string big_name = target_name.substr(std::string("code-target-").size()) + " -> 8B shape";
  auto target = Upload(big_name, (*big_t)->model);
  auto draft = Upload("1m -> 1B shape", (*big_d)->model);
  ASSERT_TRUE(target.ok() && draft.ok()) << target.status() << draft.status();
  const std::vector<TokenId> prompt = Prompt();
  char buf[256];
  std::snprintf(buf, sizeof(buf), "inflated vs small logits (last prompt position): max |diff| 8B %.4f, 1B %.4f",
                InflationError(**target, **small_t, prompt), InflationError(**draft, **small_d, prompt));
  table->Note(buf);
  table->Add(Measure(big_name, **target, bandwidth));
  table->Add(Measure("1m -> 1B shape", **draft, bandwidth));
  CompareSpeculative(**target, **draft, prompt, table);
}

// The table, then the verify kernel's times at two vocabulary sizes.
void PrintTable(const cudaDeviceProp& prop, double bandwidth, const Table& table) {
  SamplingParams greedy, dense, nucleus;
  dense.temperature = 1.0f;
  nucleus.temperature = 0.8f;
  nucleus.top_p = 0.95f;
  nucleus.top_k = 50;

  std::printf("\nspecserve GPU bench: %s, copy bandwidth %.2f TB/s (read + write)\n", prop.name, bandwidth / 1e12);
  std::printf("%-18s %8s %9s %10s | verify pass ms, K+1 = %s\n", "model", "GB read", "floor ms", "decode ms",
              "1 / 2 / 4 / 8 / 16");
  for (const Row& r : table.rows) PrintRow(stdout, r);
  for (const std::string& note : table.notes) std::printf("%s\n", note.c_str());
  for (int32_t vocab : {4096, 128256}) {
    std::printf("verify kernel, B=1 K=8, V=%-6d: greedy %.3f ms, T=1 %.3f ms, T=0.8 top-k 50 top-p 0.95 %.3f ms\n",
                vocab, VerifyKernelMs(vocab, greedy), VerifyKernelMs(vocab, dense), VerifyKernelMs(vocab, nucleus));
  }
  std::fflush(stdout);
}

TEST(CudaBench, DecodeVerifyAndKernel) {
  if (!testing::HaveDevice()) GTEST_SKIP() << "no CUDA device";
  if (std::getenv("SPECSERVE_BENCH") == nullptr) GTEST_SKIP() << "set SPECSERVE_BENCH=1 to run the benchmark";
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  const double bw = CopyBandwidth();
  std::fprintf(stderr, "%s: copy bandwidth %.2f TB/s; rows as measured (model, GB read, floor ms, decode ms | verify ms, K+1 = 1 / 2 / 4 / 8 / 16):\n",
               prop.name, bw / 1e12);
  Table table;
  MeasureLlamaShapes(bw, &table);
  ASSERT_NO_FATAL_FAILURE(MeasureTrainedPair(bw, &table));
  PrintTable(prop, bw, table);
}

#else

TEST(CudaBench, DecodeVerifyAndKernel) {
  if (!testing::HaveDevice()) GTEST_SKIP() << "built without CUDA";
}

#endif

}  // namespace
}  // namespace specserve
