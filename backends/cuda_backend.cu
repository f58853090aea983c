// The Llama forward pass on a CUDA device over a ragged batch, mirroring
// backends/cpu_backend.cc step for step: the kernels of this folder for the
// element-wise ops and attention, cuBLAS for the matrix products.
//
// - Weights are uploaded once (backends/cuda_upload.cuh): F16 matrices as
//   stored; every other type (F32, BF16, Q8_0, K-quants, ...) is dequantised
//   to fp32 on the host and rounded to F16 at upload, so one GEMM path serves
//   all files. Norm gains and biases stay fp32.
// - Activations and the KV cache are fp32. Passes of up to 32 tokens (decode,
//   verify) multiply in a fixed-order fp32 kernel, so a token's logits have
//   the same bits in any pass shape and batch (with attention's fixed key
//   chunks); larger passes (prefill) convert their input to f16 for cuBLAS
//   (kernels/cuda_matmul.cuh: split hi + lo halves by default, or one f16
//   rounding with SPECSERVE_CUDA_MATMUL=f16). The residual adds after the
//   output and down projections are folded into those products.
// - The KV pool (common/kv_cache.h) hands out block ids; the storage behind
//   them is one device allocation per layer for K and V. Truncate stays a
//   metadata change: stale slots are simply overwritten later. With
//   --kv-blocks 0 the pool is sized last, from the device's free memory after
//   the weights and the activation workspaces of a planning pass
//   (common/kv_sizing.h: headroom kept, at most --max-sessions contexts and
//   --kv-memory-mib when given); name() says what it took and why.
// - Per call, the host packs the batch's metadata (token ids, positions,
//   slots, block tables, logit rows) into pinned memory and sends it in one
//   copy; logits come back in one copy (Forward), or stay on the device for
//   the verify kernels (ForwardVerify: only accepted counts, next tokens and
//   accept flags come back) or the draft's sampling kernel (ForwardSample:
//   only the tokens and their top-N entries come back). Not done yet:
//   CUDA-graph capture of repeated decode / verify shapes, and fused QKV /
//   gate-up products.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cuda_upload.cuh"
#include "backends/make_backend.h"
#include "common/backend.h"
#include "common/fp16.h"
#include "common/kv_sizing.h"
#include "common/status_macros.h"
#include "common/tensor_types.h"
#include "kernels/cuda_add.cuh"
#include "kernels/cuda_attention.cuh"
#include "kernels/cuda_draft_sample.cuh"
#include "kernels/cuda_embedding.cuh"
#include "kernels/cuda_kv_store.cuh"
#include "kernels/cuda_matmul.cuh"
#include "kernels/cuda_rmsnorm.cuh"
#include "kernels/cuda_rope.cuh"
#include "kernels/cuda_swiglu.cuh"
#include "kernels/cuda_util.h"
#include "kernels/cuda_verify.cuh"
#include "spec/forward_sample.h"
#include "spec/forward_verify.h"
#include "spec/round.h"

namespace specserve {
namespace {

using cuda::DeviceBuffer;

// The planning pass whose activations are allocated before the KV pool is
// sized from free memory: this many tokens (a prefill chunk; capped at the
// context) and up to --max-sessions verify rounds of logits rows. Larger
// passes grow the buffers later, out of the headroom (common/kv_sizing.h).
constexpr int64_t kPlanTokens = 1024;

struct DeviceLayer {
  DeviceBuffer attn_norm;  // [n_embd] f32
  DeviceMatrix wq;         // [q_dim, n_embd]
  DeviceMatrix wk;         // [kv_dim, n_embd]
  DeviceMatrix wv;         // [kv_dim, n_embd]
  DeviceMatrix wo;         // [n_embd, q_dim]
  DeviceBuffer bq, bk, bv; // [q_dim], [kv_dim], [kv_dim] f32 (qwen2 only)
  DeviceBuffer ffn_norm;   // [n_embd] f32
  DeviceMatrix gate;       // [n_ff, n_embd]
  DeviceMatrix up;         // [n_ff, n_embd]
  DeviceMatrix down;       // [n_embd, n_ff]
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(const Model& model, const BackendOptions& opts)
      : c_(model.config), w_(model.weights), opts_(opts), device_(opts.device) {
    const char* env = std::getenv("SPECSERVE_CUDA_MATMUL");
    precision_ = (env != nullptr && std::string(env) == "f16") ? cuda::MatmulPrecision::kF16
                                                               : cuda::MatmulPrecision::kSplitF16;
    // SPECSERVE_CUDA_VERIFY=host: the verify step on the host (logits copied
    // back, the CPU Verify), the reference the device step is tested against.
    const char* verify = std::getenv("SPECSERVE_CUDA_VERIFY");
    verify_on_host_ = verify != nullptr && std::string(verify) == "host";
    // SPECSERVE_CUDA_SAMPLE=host: the draft's sampling step likewise.
    const char* sample = std::getenv("SPECSERVE_CUDA_SAMPLE");
    sample_on_host_ = sample != nullptr && std::string(sample) == "host";
  }

  ~CudaBackend() override {
    cudaSetDevice(device_);
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  absl::Status Init() {
    SPECSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    cudaDeviceProp prop;
    SPECSERVE_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device_));
    device_name_ = prop.name;
    SPECSERVE_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    RETURN_IF_ERROR(cuda::CublasStatus(cublasCreate(&cublas_), "cublasCreate"));
    RETURN_IF_ERROR(cuda::CublasStatus(cublasSetStream(cublas_, stream_), "cublasSetStream"));

    ThreadPool pool(static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u)));
    RETURN_IF_ERROR(UploadMatrix(w_.tok_embd, pool, &tok_embd_));
    if (w_.output.data == w_.tok_embd.data && w_.output.type == w_.tok_embd.type) {
      output_ = &tok_embd_;  // tied embeddings: one copy on the device
    } else {
      RETURN_IF_ERROR(UploadMatrix(w_.output, pool, &output_own_));
      output_ = &output_own_;
    }
    RETURN_IF_ERROR(UploadVector(w_.output_norm, c_.n_embd, &output_norm_));
    if (w_.rope_freqs != nullptr) RETURN_IF_ERROR(UploadVector(w_.rope_freqs, c_.rope_dim / 2, &rope_freqs_));
    layers_.resize(c_.n_layer);
    for (int l = 0; l < c_.n_layer; ++l) {
      const LayerWeights& L = w_.layers[l];
      DeviceLayer& D = layers_[l];
      RETURN_IF_ERROR(UploadVector(L.attn_norm, c_.n_embd, &D.attn_norm));
      RETURN_IF_ERROR(UploadVector(L.ffn_norm, c_.n_embd, &D.ffn_norm));
      RETURN_IF_ERROR(UploadMatrix(L.wq, pool, &D.wq));
      RETURN_IF_ERROR(UploadMatrix(L.wk, pool, &D.wk));
      RETURN_IF_ERROR(UploadMatrix(L.wv, pool, &D.wv));
      RETURN_IF_ERROR(UploadMatrix(L.wo, pool, &D.wo));
      RETURN_IF_ERROR(UploadMatrix(L.gate, pool, &D.gate));
      RETURN_IF_ERROR(UploadMatrix(L.up, pool, &D.up));
      RETURN_IF_ERROR(UploadMatrix(L.down, pool, &D.down));
      if (c_.qkv_bias) {
        RETURN_IF_ERROR(UploadVector(L.bq, c_.q_dim(), &D.bq));
        RETURN_IF_ERROR(UploadVector(L.bk, c_.kv_dim(), &D.bk));
        RETURN_IF_ERROR(UploadVector(L.bv, c_.kv_dim(), &D.bv));
      }
    }
    // The activations of a planning pass before the pool, so that the free
    // memory measured next is what the cache may take.
    const int64_t plan_t = std::min<int64_t>(c_.n_ctx, kPlanTokens);
    const int64_t plan_r = std::min<int64_t>(plan_t, int64_t{std::max(1, opts_.kv_contexts)} * (kMaxRoundK + 1));
    RETURN_IF_ERROR(ReserveFor(plan_t, plan_r, c_.n_ctx));
    SPECSERVE_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
    RETURN_IF_ERROR(CreatePool());
    const size_t per_layer = static_cast<size_t>(pool_->num_blocks()) * pool_->block_size() * c_.kv_dim();
    // The KV pool goes after the weights; when it does not fit, say how big
    // it was, what was free and which flags size it.
    const size_t kv_bytes = 2 * per_layer * c_.n_layer * sizeof(float);
    if (absl::Status st = kv_.Allocate(kv_bytes); !st.ok()) {
      size_t free_bytes = 0, total_bytes = 0;
      cudaMemGetInfo(&free_bytes, &total_bytes);
      cudaGetLastError();
      return absl::ResourceExhaustedError(absl::StrCat(
          "the KV cache (", pool_->num_blocks(), " blocks of ", pool_->block_size(), " positions, ", kv_bytes >> 20,
          " MiB) does not fit on CUDA device ", device_, " after the weights (", free_bytes >> 20, " of ",
          total_bytes >> 20, " MiB free): lower --kv-blocks, or --kv-memory-mib / --max-sessions when --kv-blocks "
          "is 0 (", st.message(), ")"));
    }
    SPECSERVE_CUDA_RETURN_IF_ERROR(cudaMemset(kv_.get(), 0, kv_.bytes()));
    // The uploads and the memset ran on the legacy stream; stream_ does not
    // wait for it (non-blocking), so finish them here.
    SPECSERVE_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
    return absl::OkStatus();
  }

  KvPool& kv_pool() override { return *pool_; }
  const ModelConfig& config() const override { return c_; }
  std::string name() const override {
    return absl::StrCat("cuda(device ", device_, ": ", device_name_, ", ",
                        precision_ == cuda::MatmulPrecision::kF16 ? "f16" : "split-f16", " matmul, ",
                        kv_size_.Describe(opts_.kv_block_size, KvBytesPerPosition(c_), opts_.kv_contexts), ")");
  }

  absl::Status Forward(absl::Span<const ForwardSeq> batch, std::vector<float>* logits) override {
    SPECSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    RETURN_IF_ERROR(PrepareBatch(batch, c_, *pool_));
    absl::Status st = Run(batch, logits);
    if (!st.ok()) {
      cudaStreamSynchronize(stream_);  // nothing in flight may still read the pinned metadata
      // Give back the slots PrepareBatch reserved: no sequence changed.
      for (const ForwardSeq& s : batch) pool_->Truncate(*s.kv, s.kv->length);
      return st;
    }
    for (const ForwardSeq& s : batch) s.kv->length += static_cast<int32_t>(s.tokens.size());
    return absl::OkStatus();
  }

  // The logits stay on the device; the verify kernels run for every block
  // of the batch in one launch (kernels/cuda_verify.cuh); only their O(K)
  // results, and the rows of sequences without a block, come back.
  absl::Status ForwardVerify(absl::Span<const ForwardSeq> batch, absl::Span<const VerifyInput* const> verify,
                             VerifyBatchOutput* out) override {
    if (verify_on_host_) {
      RETURN_IF_ERROR(ForwardVerifyOnHost(*this, batch, verify, out));
      out->bytes_to_host = static_cast<int64_t>(out->logits.size() * sizeof(float));
      verify_bytes_to_host_ += out->bytes_to_host;
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(ValidateForwardVerify(batch, verify, c_));
    SPECSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    RETURN_IF_ERROR(PrepareBatch(batch, c_, *pool_));
    absl::Status st = RunVerify(batch, verify, out);
    if (!st.ok()) {
      cudaStreamSynchronize(stream_);
      for (const ForwardSeq& s : batch) pool_->Truncate(*s.kv, s.kv->length);
      return st;
    }
    for (const ForwardSeq& s : batch) s.kv->length += static_cast<int32_t>(s.tokens.size());
    verify_bytes_to_host_ += out->bytes_to_host;
    return absl::OkStatus();
  }
  std::string verify_location() const override { return verify_on_host_ ? "cpu" : "cuda"; }
  int64_t verify_bytes_to_host() const override { return verify_bytes_to_host_; }

  // The logits stay on the device; the draft's sampling kernel runs for every
  // rule of the batch in one launch (kernels/cuda_draft_sample.cuh); only the
  // tokens and top-N entries, and the rows of sequences without a rule, come back.
  absl::Status ForwardSample(absl::Span<const ForwardSeq> batch, absl::Span<const DraftSampleInput* const> sample,
                             SampleBatchOutput* out) override {
    if (sample_on_host_) {
      RETURN_IF_ERROR(ForwardSampleOnHost(*this, batch, sample, out));
      out->bytes_to_host = static_cast<int64_t>(out->logits.size() * sizeof(float));
      sample_bytes_to_host_ += out->bytes_to_host;
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(ValidateForwardSample(batch, sample));
    SPECSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    RETURN_IF_ERROR(PrepareBatch(batch, c_, *pool_));
    absl::Status st = RunSample(batch, sample, out);
    if (!st.ok()) {
      cudaStreamSynchronize(stream_);
      for (const ForwardSeq& s : batch) pool_->Truncate(*s.kv, s.kv->length);
      return st;
    }
    for (const ForwardSeq& s : batch) s.kv->length += static_cast<int32_t>(s.tokens.size());
    sample_bytes_to_host_ += out->bytes_to_host;
    return absl::OkStatus();
  }
  std::string sample_location() const override { return sample_on_host_ ? "cpu" : "cuda"; }
  int64_t sample_bytes_to_host() const override { return sample_bytes_to_host_; }

 private:
  // Device views of the current pass's metadata.
  struct Meta {
    int32_t* tokens;       // [T]
    int32_t* positions;    // [T]
    int32_t* token_seq;    // [T]
    int64_t* slots;        // [T]
    int32_t* table_offset; // [n_seqs]
    int32_t* tables;       // concatenated block tables
    int32_t* logit_rows;   // [R] flattened-batch row of each logits row
  };

  absl::Status Run(absl::Span<const ForwardSeq> batch, std::vector<float>* logits) {
    RETURN_IF_ERROR(Layout(batch));
    if (T_ == 0) {
      logits->clear();
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(Embed());
    for (int l = 0; l < c_.n_layer; ++l) RETURN_IF_ERROR(Block(l));
    return Logits(logits);
  }

  // Packs the batch's metadata, uploads it, and sizes the activations.
  absl::Status Layout(absl::Span<const ForwardSeq> batch) {
    T_ = 0;
    R_ = 0;
    int64_t table_len = 0;
    max_keys_ = 1;
    for (const ForwardSeq& s : batch) {
      T_ += static_cast<int64_t>(s.tokens.size());
      R_ += s.n_logits;
      table_len += static_cast<int64_t>(s.kv->blocks.size());
      max_keys_ = std::max<int32_t>(max_keys_, s.kv->length + static_cast<int32_t>(s.tokens.size()));
    }
    if (T_ == 0) return absl::OkStatus();
    const int64_t B = static_cast<int64_t>(batch.size());
    // Sections (8-byte aligned): slots first, then the int32 arrays.
    const size_t n32 = 3 * T_ + B + table_len + R_;
    const size_t bytes = T_ * sizeof(int64_t) + n32 * sizeof(int32_t);
    RETURN_IF_ERROR(meta_host_.Reserve(bytes));
    RETURN_IF_ERROR(meta_dev_.Reserve(bytes));
    char* h = meta_host_.get();
    int64_t* slots = reinterpret_cast<int64_t*>(h);
    int32_t* tokens = reinterpret_cast<int32_t*>(slots + T_);
    int32_t* positions = tokens + T_;
    int32_t* token_seq = positions + T_;
    int32_t* table_offset = token_seq + T_;
    int32_t* tables = table_offset + B;
    int32_t* logit_rows = tables + table_len;
    const int32_t bs = pool_->block_size();
    int64_t t = 0, tab = 0, r = 0;
    for (int64_t i = 0; i < B; ++i) {
      const ForwardSeq& s = batch[i];
      const KvSeq& kv = *s.kv;
      table_offset[i] = static_cast<int32_t>(tab);
      std::copy(kv.blocks.begin(), kv.blocks.end(), tables + tab);
      tab += static_cast<int64_t>(kv.blocks.size());
      const int64_t n = static_cast<int64_t>(s.tokens.size());
      for (int64_t j = 0; j < n; ++j, ++t) {
        const int32_t p = kv.length + static_cast<int32_t>(j);
        tokens[t] = s.tokens[j];
        positions[t] = p;
        token_seq[t] = static_cast<int32_t>(i);
        slots[t] = static_cast<int64_t>(kv.blocks[p / bs]) * bs + p % bs;
        if (j >= n - s.n_logits) logit_rows[r++] = static_cast<int32_t>(t);
      }
    }
    SPECSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(meta_dev_.get(), h, bytes, cudaMemcpyHostToDevice, stream_));
    int64_t* ds = meta_dev_.as<int64_t>();
    int32_t* d32 = reinterpret_cast<int32_t*>(ds + T_);
    meta_ = Meta{d32, d32 + T_, d32 + 2 * T_, ds, d32 + 3 * T_, d32 + 3 * T_ + B, d32 + 3 * T_ + B + table_len};
    return Reserve();
  }

  // The KV pool: --kv-blocks when given, else from the free memory now
  // (common/kv_sizing.h).
  absl::Status CreatePool() {
    if (opts_.kv_blocks > 0) {
      kv_size_.blocks = opts_.kv_blocks;
      kv_size_.limit = KvLimit::kBlocksFlag;
    } else {
      size_t free_bytes = 0, total_bytes = 0;
      SPECSERVE_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
      absl::StatusOr<KvPoolSize> size =
          KvBlocksFromFreeMemory(c_, opts_, KvBytesPerPosition(c_), static_cast<int64_t>(free_bytes));
      if (!size.ok()) {
        return absl::ResourceExhaustedError(absl::StrCat("CUDA device ", device_, " (", total_bytes >> 20,
                                                         " MiB in all): ", size.status().message()));
      }
      kv_size_ = *size;
    }
    pool_ = std::make_unique<KvPool>(kv_size_.blocks, opts_.kv_block_size);
    return absl::OkStatus();
  }

  // Activations for this pass's shape (T_ tokens, R_ logits rows).
  absl::Status Reserve() { return ReserveFor(T_, R_, max_keys_); }

  // Grows the activation buffers to hold a pass of T tokens, R logits rows
  // and attention over up to max_keys keys; they never shrink.
  absl::Status ReserveFor(int64_t T, int64_t R, int32_t max_keys) {
    const int64_t d = c_.n_embd;
    RETURN_IF_ERROR(x_.Reserve(T * d * sizeof(float)));
    RETURN_IF_ERROR(xn_.Reserve(T * d * sizeof(float)));
    RETURN_IF_ERROR(q_.Reserve(T * c_.q_dim() * sizeof(float)));
    RETURN_IF_ERROR(k_.Reserve(T * c_.kv_dim() * sizeof(float)));
    RETURN_IF_ERROR(v_.Reserve(T * c_.kv_dim() * sizeof(float)));
    RETURN_IF_ERROR(attn_.Reserve(T * c_.q_dim() * sizeof(float)));
    RETURN_IF_ERROR(gate_.Reserve(T * c_.n_ff * sizeof(float)));
    RETURN_IF_ERROR(up_.Reserve(T * c_.n_ff * sizeof(float)));
    RETURN_IF_ERROR(hidden_.Reserve(std::max<int64_t>(R, 1) * d * sizeof(float)));
    RETURN_IF_ERROR(logits_.Reserve(std::max<int64_t>(R, 1) * c_.vocab * sizeof(float)));
    size_t mm = 0;
    const int64_t shapes[][2] = {{c_.q_dim(), d}, {c_.kv_dim(), d}, {d, c_.q_dim()}, {c_.n_ff, d}, {d, c_.n_ff}};
    for (const auto& rc : shapes) mm = std::max(mm, cuda::MatmulWorkspaceBytes(T, rc[0], rc[1], precision_));
    mm = std::max(mm, cuda::MatmulWorkspaceBytes(R, c_.vocab, d, precision_));
    RETURN_IF_ERROR(matmul_ws_.Reserve(mm));
    RETURN_IF_ERROR(attn_ws_.Reserve(
        cuda::PagedAttentionWorkspaceBytes(T, c_.n_head, c_.n_head_kv, c_.head_dim, max_keys)));
    return absl::OkStatus();
  }

  enum Flags { kNone = 0, kAccumulate = 1, kSameInput = 2 };  // kSameInput: x as in the previous MatMul
  absl::Status MatMul(const DeviceMatrix& w, const DeviceBuffer& x, int64_t T, DeviceBuffer& y, int flags = kNone) {
    cuda::MatmulArgs a;
    a.w = w.data.get();
    a.rows = w.rows;
    a.cols = w.cols;
    a.x = x.as<float>();
    a.T = T;
    a.y = y.as<float>();
    a.accumulate = (flags & kAccumulate) != 0;
    a.reuse_converted_x = (flags & kSameInput) != 0;
    a.precision = precision_;
    a.workspace = matmul_ws_.get();
    a.workspace_bytes = matmul_ws_.bytes();
    a.handle = cublas_;
    return cuda::LaunchMatmul(a, stream_);
  }

  absl::Status RmsNorm(const DeviceBuffer& x, const DeviceBuffer& w, DeviceBuffer& y, int64_t T) {
    return cuda::LaunchRmsNorm({x.as<float>(), w.as<float>(), y.as<float>(), T, c_.n_embd, c_.rms_eps}, stream_);
  }

  absl::Status Embed() {
    cuda::EmbeddingArgs a;
    a.table = tok_embd_.data.get();
    a.type = GgmlType::kF16;
    a.rows = c_.vocab;
    a.cols = c_.n_embd;
    a.ids = meta_.tokens;
    a.T = T_;
    a.out = x_.as<float>();
    return cuda::LaunchEmbedding(a, stream_);
  }

  // x += Attention(RmsNorm(x)); x += FFN(RmsNorm(x))
  absl::Status Block(int l) {
    const DeviceLayer& L = layers_[l];
    RETURN_IF_ERROR(RmsNorm(x_, L.attn_norm, xn_, T_));
    RETURN_IF_ERROR(MatMul(L.wq, xn_, T_, q_));
    RETURN_IF_ERROR(MatMul(L.wk, xn_, T_, k_, kSameInput));
    RETURN_IF_ERROR(MatMul(L.wv, xn_, T_, v_, kSameInput));
    if (c_.qkv_bias) {
      RETURN_IF_ERROR(cuda::LaunchAdd({q_.as<float>(), L.bq.as<float>(), T_, c_.q_dim(), true}, stream_));
      RETURN_IF_ERROR(cuda::LaunchAdd({k_.as<float>(), L.bk.as<float>(), T_, c_.kv_dim(), true}, stream_));
      RETURN_IF_ERROR(cuda::LaunchAdd({v_.as<float>(), L.bv.as<float>(), T_, c_.kv_dim(), true}, stream_));
    }
    const float* freqs = rope_freqs_.as<float>();  // nullptr when the file has none
    const cpu::RopeParams rq{c_.n_head, c_.head_dim, c_.rope_dim, c_.rope_base, c_.rope_neox, freqs,
                             c_.rope_freq_scale};
    const cpu::RopeParams rk{c_.n_head_kv, c_.head_dim, c_.rope_dim, c_.rope_base, c_.rope_neox, freqs,
                             c_.rope_freq_scale};
    RETURN_IF_ERROR(cuda::LaunchRope({q_.as<float>(), meta_.positions, T_, 0, rq}, stream_));
    RETURN_IF_ERROR(cuda::LaunchRope({k_.as<float>(), meta_.positions, T_, 0, rk}, stream_));

    const int64_t slots = static_cast<int64_t>(pool_->num_blocks()) * pool_->block_size();
    float* k_cache = kv_.as<float>() + (2 * l) * slots * c_.kv_dim();
    float* v_cache = k_cache + slots * c_.kv_dim();
    cuda::KvStoreArgs kvs;
    kvs.k = k_.as<float>();
    kvs.v = v_.as<float>();
    kvs.slots = meta_.slots;
    kvs.T = T_;
    kvs.kv_dim = c_.kv_dim();
    kvs.k_cache = k_cache;
    kvs.v_cache = v_cache;
    kvs.num_slots = slots;
    RETURN_IF_ERROR(cuda::LaunchKvStore(kvs, stream_));

    cuda::PagedAttentionArgs at;
    at.q = q_.as<float>();
    at.positions = meta_.positions;
    at.token_seq = meta_.token_seq;
    at.block_tables = meta_.tables;
    at.table_offset = meta_.table_offset;
    at.T = T_;
    at.max_keys = max_keys_;
    at.k_cache = k_cache;
    at.v_cache = v_cache;
    at.n_head = c_.n_head;
    at.n_head_kv = c_.n_head_kv;
    at.head_dim = c_.head_dim;
    at.block_size = pool_->block_size();
    at.scale = 1.0f / std::sqrt(static_cast<float>(c_.head_dim));
    at.out = attn_.as<float>();
    at.workspace = attn_ws_.get();
    at.workspace_bytes = attn_ws_.bytes();
    RETURN_IF_ERROR(cuda::LaunchPagedAttention(at, stream_));
    RETURN_IF_ERROR(MatMul(L.wo, attn_, T_, x_, kAccumulate));

    RETURN_IF_ERROR(RmsNorm(x_, L.ffn_norm, xn_, T_));
    RETURN_IF_ERROR(MatMul(L.gate, xn_, T_, gate_));
    RETURN_IF_ERROR(MatMul(L.up, xn_, T_, up_, kSameInput));
    RETURN_IF_ERROR(cuda::LaunchSwiGlu({gate_.as<float>(), up_.as<float>(), gate_.as<float>(), T_ * c_.n_ff}, stream_));
    return MatMul(L.down, gate_, T_, x_, kAccumulate);
  }

  // Forward's verify-step counterpart: the pass, then the verify launch over
  // the device logits [R, vocab]; rows of block-less sequences to the host.
  absl::Status RunVerify(absl::Span<const ForwardSeq> batch, absl::Span<const VerifyInput* const> verify,
                         VerifyBatchOutput* out) {
    return RunDeviceStep<cuda::DeviceVerifyStats>(
        batch, verify, &out->results, &out->first_row, &out->logits, &out->verify_seconds, &out->bytes_to_host,
        [&](const std::vector<VerifyInput>& blocks, const std::vector<int64_t>& rows, cuda::DeviceVerifyStats* stats) {
          return verifier_.RunOnDevice(blocks, logits_.as<float>(), rows, R_, stream_, stats);
        });
  }

  // Forward's sampling-step counterpart: the pass, then the draft's sampling
  // launch over the device logits [R, vocab]; rows of rule-less sequences to the host.
  absl::Status RunSample(absl::Span<const ForwardSeq> batch, absl::Span<const DraftSampleInput* const> sample,
                         SampleBatchOutput* out) {
    return RunDeviceStep<cuda::DeviceSampleStats>(
        batch, sample, &out->samples, &out->first_row, &out->logits, &out->sample_seconds, &out->bytes_to_host,
        [&](const std::vector<DraftSampleInput>& rules, const std::vector<int64_t>& rows,
            cuda::DeviceSampleStats* stats) {
          return sampler_.RunOnDevice(rules, logits_.as<float>(), rows, R_, c_.vocab, stream_, stats);
        });
  }

  // The pass over `batch`, then `launch(inputs, rows, &stats)` (a device
  // step over the logits [R, vocab] of the sequences i with in[i] set,
  // `rows` where each one's rows start) giving one Result per such sequence;
  // the rows of the other sequences are copied to the host (`logits`,
  // `first_row`). `seconds` and `bytes_to_host` come from the launch's stats
  // plus the copied rows.
  template <class Stats, class In, class Result, class Launch>
  absl::Status RunDeviceStep(absl::Span<const ForwardSeq> batch, absl::Span<const In* const> in,
                             std::vector<Result>* results, std::vector<int64_t>* first_row,
                             std::vector<float>* logits, double* seconds, int64_t* bytes_to_host, Launch launch) {
    results->assign(batch.size(), Result{});
    first_row->assign(batch.size(), 0);
    logits->clear();
    *seconds = 0;
    *bytes_to_host = 0;
    RETURN_IF_ERROR(Layout(batch));
    if (T_ == 0) return absl::OkStatus();
    RETURN_IF_ERROR(Embed());
    for (int l = 0; l < c_.n_layer; ++l) RETURN_IF_ERROR(Block(l));
    if (R_ == 0) return cuda::CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    RETURN_IF_ERROR(DeviceLogits());
    std::vector<In> inputs;
    std::vector<int64_t> input_row;
    std::vector<size_t> input_seq;
    int64_t row = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (in[i] != nullptr) {
        inputs.push_back(*in[i]);
        input_row.push_back(row);
        input_seq.push_back(i);
      }
      row += batch[i].n_logits;
    }
    const size_t row_bytes = static_cast<size_t>(c_.vocab) * sizeof(float);
    ASSIGN_OR_RETURN(const int64_t host_rows,
                     QueueHostRows(batch, [&](size_t i) { return in[i] != nullptr; }, first_row));
    Stats stats;
    ASSIGN_OR_RETURN(std::vector<Result> got, launch(inputs, input_row, &stats));
    for (size_t j = 0; j < input_seq.size(); ++j) (*results)[input_seq[j]] = std::move(got[j]);
    SPECSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));  // the rows, when no launch ran
    logits->assign(reinterpret_cast<const float*>(logits_host_.get()),
                   reinterpret_cast<const float*>(logits_host_.get()) + host_rows * c_.vocab);
    *seconds = stats.kernel_seconds;
    *bytes_to_host = stats.bytes_to_host + host_rows * static_cast<int64_t>(row_bytes);
    return absl::OkStatus();
  }

  // Queues the copy of the logits rows (in logits_, [R, vocab]) of every
  // sequence i with !on_device(i) into logits_host_, compacted in batch
  // order; (*first_row)[i] is where such a sequence's rows start there.
  // Returns the rows; the caller synchronises the stream before reading.
  template <class OnDevice>
  absl::StatusOr<int64_t> QueueHostRows(absl::Span<const ForwardSeq> batch, OnDevice on_device,
                                        std::vector<int64_t>* first_row) {
    const size_t row_bytes = static_cast<size_t>(c_.vocab) * sizeof(float);
    int64_t host_rows = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (on_device(i)) continue;
      (*first_row)[i] = host_rows;
      host_rows += batch[i].n_logits;
    }
    if (host_rows == 0) return host_rows;
    RETURN_IF_ERROR(logits_host_.Reserve(host_rows * row_bytes));
    int64_t first = 0;  // the sequence's first row among all R rows
    for (size_t i = 0; i < batch.size(); first += batch[i].n_logits, ++i) {
      if (on_device(i) || batch[i].n_logits == 0) continue;
      SPECSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(logits_host_.get() + (*first_row)[i] * row_bytes,
                                                     logits_.as<float>() + first * c_.vocab,
                                                     batch[i].n_logits * row_bytes, cudaMemcpyDeviceToHost,
                                                     stream_));
    }
    return host_rows;
  }

  // The final norm and output projection of the rows asked for: logits_ [R, vocab].
  absl::Status DeviceLogits() {
    // Gather the final hidden states of the rows asked for: [R, n_embd].
    cuda::EmbeddingArgs g;
    g.table = x_.get();
    g.type = GgmlType::kF32;
    g.rows = T_;
    g.cols = c_.n_embd;
    g.ids = meta_.logit_rows;
    g.T = R_;
    g.out = hidden_.as<float>();
    RETURN_IF_ERROR(cuda::LaunchEmbedding(g, stream_));
    RETURN_IF_ERROR(RmsNorm(hidden_, output_norm_, hidden_, R_));
    return MatMul(*output_, hidden_, R_, logits_);
  }

  absl::Status Logits(std::vector<float>* logits) {
    logits->resize(static_cast<size_t>(R_) * c_.vocab);
    if (R_ == 0) return cuda::CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    RETURN_IF_ERROR(DeviceLogits());
    const size_t bytes = logits->size() * sizeof(float);
    RETURN_IF_ERROR(logits_host_.Reserve(bytes));
    SPECSERVE_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(logits_host_.get(), logits_.get(), bytes, cudaMemcpyDeviceToHost, stream_));
    SPECSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    std::memcpy(logits->data(), logits_host_.get(), bytes);
    return absl::OkStatus();
  }

  const ModelConfig& c_;
  const ModelWeights& w_;
  const BackendOptions opts_;
  std::unique_ptr<KvPool> pool_;  // made by Init, after the weights (CreatePool)
  KvPoolSize kv_size_;            // its size and what set it
  const int device_;
  std::string device_name_;
  cuda::MatmulPrecision precision_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;

  DeviceMatrix tok_embd_;            // [vocab, n_embd]
  DeviceMatrix output_own_;          // [vocab, n_embd] when not tied
  const DeviceMatrix* output_ = nullptr;
  DeviceBuffer output_norm_;         // [n_embd]
  DeviceBuffer rope_freqs_;          // [rope_dim / 2] Llama 3.1 frequency divisors, or empty
  std::vector<DeviceLayer> layers_;  // [n_layer]
  DeviceBuffer kv_;                  // [n_layer][K, V][num_blocks * block_size, kv_dim] f32

  // The current pass.
  int64_t T_ = 0, R_ = 0;
  int32_t max_keys_ = 1;
  Meta meta_{};
  PinnedBuffer meta_host_, logits_host_;
  cuda::DeviceVerifier verifier_;      // the verify step's buffers
  int64_t verify_bytes_to_host_ = 0;   // all ForwardVerify calls
  bool verify_on_host_ = false;        // SPECSERVE_CUDA_VERIFY=host
  cuda::DeviceDraftSampler sampler_;   // the draft's sampling step's buffers
  int64_t sample_bytes_to_host_ = 0;   // all ForwardSample calls
  bool sample_on_host_ = false;        // SPECSERVE_CUDA_SAMPLE=host
  DeviceBuffer meta_dev_;
  DeviceBuffer x_, xn_, q_, k_, v_, attn_, gate_, up_, hidden_, logits_;
  DeviceBuffer matmul_ws_, attn_ws_;
};

}  // namespace

absl::Status SelectCudaDevice(int device) {
  std::string why;
  const int n = cuda::DeviceCount(&why);
  if (n == 0) return absl::FailedPreconditionError(absl::StrCat("no CUDA device (", why, ")"));
  if (device < 0 || device >= n) {
    return absl::InvalidArgumentError(absl::StrCat("--device ", device, ": this machine has ", n,
                                                   " CUDA device", n == 1 ? "" : "s", ", ordinals 0..", n - 1));
  }
  return cuda::CudaStatus(cudaSetDevice(device), "cudaSetDevice");
}

absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(const Model& model, const BackendOptions& opts) {
  const int n = cuda::DeviceCount();
  if (n == 0) return absl::FailedPreconditionError("no CUDA device");
  if (opts.device < 0 || opts.device >= n) {
    return absl::FailedPreconditionError(
        absl::StrCat("CUDA device ", opts.device, " requested but ", n, " present (ordinals 0..", n - 1, ")"));
  }
  if (opts.kv_block_size < 1 || opts.kv_block_size > 1024) {
    return absl::InvalidArgumentError("kv_block_size must be in [1, 1024]");
  }
  const ModelConfig& c = model.config;
  if (c.head_dim % 4 != 0 || c.head_dim > 256) {
    return absl::UnimplementedError(
        absl::StrCat("the CUDA attention kernel needs head_dim a multiple of 4 and <= 256, got ", c.head_dim));
  }
  // The KV pool is sized in Init, after the weights (common/kv_sizing.h).
  auto backend = std::make_unique<CudaBackend>(model, opts);
  RETURN_IF_ERROR(backend->Init());
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace specserve
