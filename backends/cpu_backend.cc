// The Llama forward pass on the CPU over a ragged batch.
// All new tokens of all sequences go through the matrix products together
// (each weight row is read once per pass); attention runs per sequence
// against its own paged cache.
#include <cmath>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cpu_packed_weights.h"
#include "backends/make_backend.h"
#include "common/backend.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"
#include "kernels/cpu_attention.h"
#include "kernels/cpu_matmul.h"
#include "kernels/cpu_matmul_int8.h"
#include "kernels/cpu_matmul_packed.h"
#include "kernels/cpu_ops.h"
#include "spec/forward_sample.h"
#include "spec/forward_verify.h"

namespace specserve {
namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend(const Model& model, const BackendOptions& opts, int32_t kv_blocks)
      : model_(model), c_(model.config),
        packed_(opts.cpu_activations == MatMulActivations::kInt8 ? PackWeightsForInt8(model.weights, opts.threads)
                                                                  : nullptr),
        w_(packed_ ? packed_->views : model.weights),
        pool_(kv_blocks, opts.kv_block_size), threads_ptr_(opts.shared_pool ? opts.shared_pool : std::make_shared<ThreadPool>(opts.threads)),
        threads_(*threads_ptr_), act_(opts.cpu_activations) {
    const size_t per_layer = static_cast<size_t>(kv_blocks) * opts.kv_block_size * c_.kv_dim();
    k_cache_.resize(c_.n_layer);
    v_cache_.resize(c_.n_layer);
    for (int l = 0; l < c_.n_layer; ++l) {
      // Not zeroed: a slot is written before any pass reads it, so the
      // pool's pages are only committed as sessions use them.
      k_cache_[l].reset(new float[per_layer]);
      v_cache_[l].reset(new float[per_layer]);
    }
  }

  KvPool& kv_pool() override { return pool_; }
  const ModelConfig& config() const override { return c_; }
  std::string name() const override { return absl::StrCat("cpu(", threads_.size(), " threads",
                        act_ == MatMulActivations::kInt8 ? ", int8 activations" : "", ")"); }

  absl::Status Forward(absl::Span<const ForwardSeq> batch, std::vector<float>* logits) override {
    return ForwardFeatures(batch, logits, nullptr);
  }

  // features: nullptr, or the gathered rows before the final norm.
  absl::Status ForwardFeatures(absl::Span<const ForwardSeq> batch, std::vector<float>* logits,
                               std::vector<float>* features) override {
    RETURN_IF_ERROR(PrepareBatch(batch, c_, pool_));
    Layout(batch);
    Embed(batch);
    for (int l = 0; l < c_.n_layer; ++l) Block(batch, l);
    Logits(batch, logits, features);
    for (const ForwardSeq& s : batch) s.kv->length += static_cast<int32_t>(s.tokens.size());
    return absl::OkStatus();
  }

  // Forward to host logits, then the CPU Verify (spec/verify.h).
  absl::Status ForwardVerify(absl::Span<const ForwardSeq> batch, absl::Span<const VerifyInput* const> verify,
                             VerifyBatchOutput* out) override {
    return ForwardVerifyOnHost(*this, batch, verify, out);
  }
  std::string verify_location() const override { return "cpu"; }

  // Forward to host logits, then the draft's host sampling (spec/forward_sample.h).
  absl::Status ForwardSample(absl::Span<const ForwardSeq> batch, absl::Span<const DraftSampleInput* const> sample,
                             SampleBatchOutput* out) override {
    return ForwardSampleOnHost(*this, batch, sample, out);
  }
  std::string sample_location() const override { return "cpu"; }

 private:
  // Per-token bookkeeping for the flattened batch: token t belongs to
  // sequence seq_of_[t] and sits at absolute position pos_[t].
  void Layout(absl::Span<const ForwardSeq> batch) {
    T_ = 0;
    for (const ForwardSeq& s : batch) T_ += static_cast<int64_t>(s.tokens.size());
    pos_.resize(T_);
    seq_of_.resize(T_);
    seq_first_.resize(batch.size());
    int64_t t = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      seq_first_[i] = t;
      for (size_t j = 0; j < batch[i].tokens.size(); ++j, ++t) {
        pos_[t] = batch[i].kv->length + static_cast<int32_t>(j);
        seq_of_[t] = static_cast<int32_t>(i);
      }
    }
    const int64_t d = c_.n_embd;
    x_.resize(T_ * d);
    xn_.resize(T_ * d);
    q_.resize(T_ * c_.q_dim());
    k_.resize(T_ * c_.kv_dim());
    v_.resize(T_ * c_.kv_dim());
    attn_.resize(T_ * c_.q_dim());
    proj_.resize(T_ * d);
    gate_.resize(T_ * c_.n_ff);
    up_.resize(T_ * c_.n_ff);
  }

  void Embed(absl::Span<const ForwardSeq> batch) {
    int64_t t = 0;
    for (const ForwardSeq& s : batch) {
      for (TokenId id : s.tokens) DequantizeMatrixRow(w_.tok_embd, id, x_.data() + (t++) * c_.n_embd);
    }
  }

  // x += Attention(RmsNorm(x)); x += FFN(RmsNorm(x))
  void Block(absl::Span<const ForwardSeq> batch, int l) {
    const LayerWeights& L = w_.layers[l];
    cpu::RmsNorm(x_.data(), L.attn_norm, xn_.data(), T_, c_.n_embd, c_.rms_eps);
    MatMul(L.wq, xn_.data(), T_, q_.data(), threads_, act_);
    MatMul(L.wk, xn_.data(), T_, k_.data(), threads_, act_);
    MatMul(L.wv, xn_.data(), T_, v_.data(), threads_, act_);
    if (c_.qkv_bias) {
      cpu::AddBias(q_.data(), L.bq, T_, c_.q_dim());
      cpu::AddBias(k_.data(), L.bk, T_, c_.kv_dim());
      cpu::AddBias(v_.data(), L.bv, T_, c_.kv_dim());
    }
    const cpu::RopeParams rq{c_.n_head, c_.head_dim, c_.rope_dim, c_.rope_base, c_.rope_neox,
                             w_.rope_freqs, c_.rope_freq_scale};
    const cpu::RopeParams rk{c_.n_head_kv, c_.head_dim, c_.rope_dim, c_.rope_base, c_.rope_neox,
                             w_.rope_freqs, c_.rope_freq_scale};
    if (l == 0) {
      rope_cs_.resize(T_ * c_.rope_dim);
      cpu::RopeAngles(pos_.data(), T_, rq, rope_cs_.data());
    }
    cpu::RopeApply(q_.data(), T_, rq, rope_cs_.data());
    cpu::RopeApply(k_.data(), T_, rk, rope_cs_.data());
    StoreKv(batch, l);
    Attend(batch, l);
    MatMul(L.wo, attn_.data(), T_, proj_.data(), threads_, act_);
    cpu::AddInPlace(x_.data(), proj_.data(), T_ * c_.n_embd);

    cpu::RmsNorm(x_.data(), L.ffn_norm, xn_.data(), T_, c_.n_embd, c_.rms_eps);
    MatMul(L.gate, xn_.data(), T_, gate_.data(), threads_, act_);
    MatMul(L.up, xn_.data(), T_, up_.data(), threads_, act_);
    cpu::SwiGlu(gate_.data(), up_.data(), gate_.data(), T_ * c_.n_ff);
    MatMul(L.down, gate_.data(), T_, proj_.data(), threads_, act_);
    cpu::AddInPlace(x_.data(), proj_.data(), T_ * c_.n_embd);
  }

  void StoreKv(absl::Span<const ForwardSeq> batch, int l) {
    const int64_t kvd = c_.kv_dim();
    const int32_t bs = pool_.block_size();
    for (int64_t t = 0; t < T_; ++t) {
      const KvSeq& kv = *batch[seq_of_[t]].kv;
      const int32_t p = pos_[t];
      const int64_t block = kv.blocks[p / bs];
      cpu::StoreKeys(k_.data() + t * kvd, c_.n_head_kv, c_.head_dim, bs, block, p % bs, k_cache_[l].get());
      std::copy_n(v_.data() + t * kvd, kvd, v_cache_[l].get() + (block * bs + p % bs) * kvd);
    }
  }

  // Work items are (sequence, kv head): each reads its slice of the cache once
  // for all of the sequence's new tokens and the query heads of its group.
  void Attend(absl::Span<const ForwardSeq> batch, int l) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(c_.head_dim));
    const int64_t items = static_cast<int64_t>(batch.size()) * c_.n_head_kv;
    threads_.ParallelFor(items, 1, [&](int64_t begin, int64_t end) {
      thread_local std::vector<float> scratch;
      for (int64_t item = begin; item < end;) {
        const int64_t s = item / c_.n_head_kv;
        const int64_t stop = std::min(end, (s + 1) * c_.n_head_kv);
        const int64_t first = seq_first_[s];
        const int64_t n = static_cast<int64_t>(batch[s].tokens.size());
        if (n > 0) {
          cpu::PagedAttentionArgs a{q_.data() + first * c_.q_dim(), pos_.data() + first, n,
                                    k_cache_[l].get(), v_cache_[l].get(), batch[s].kv->blocks.data(),
                                    c_.n_head, c_.n_head_kv, c_.head_dim, pool_.block_size(), scale,
                                    attn_.data() + first * c_.q_dim()};
          scratch.resize(cpu::PagedAttentionScratch(a));
          cpu::PagedAttention(a, item - s * c_.n_head_kv, stop - s * c_.n_head_kv, scratch.data());
        }
        item = stop;
      }
    });
  }

  void Logits(absl::Span<const ForwardSeq> batch, std::vector<float>* logits, std::vector<float>* features) {
    int64_t rows = 0;
    for (const ForwardSeq& s : batch) rows += s.n_logits;
    // Gather the final hidden states of the rows asked for: [rows, n_embd].
    hidden_.resize(rows * c_.n_embd);
    int64_t r = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      const int64_t n = static_cast<int64_t>(batch[i].tokens.size());
      for (int64_t j = n - batch[i].n_logits; j < n; ++j, ++r) {
        std::copy_n(x_.data() + (seq_first_[i] + j) * c_.n_embd, c_.n_embd, hidden_.data() + r * c_.n_embd);
      }
    }
    if (features != nullptr) features->assign(hidden_.begin(), hidden_.end());
    cpu::RmsNorm(hidden_.data(), w_.output_norm, hidden_.data(), rows, c_.n_embd, c_.rms_eps);
    logits->resize(rows * c_.vocab);
    MatMul(w_.output, hidden_.data(), rows, logits->data(), threads_, act_);
  }

  const Model& model_;
  const ModelConfig& c_;
  // Int8 activations: the Q8_0, Q4_K and Q6_K matrices packed for the int8 kernel.
  std::unique_ptr<PackedWeights> packed_;
  const ModelWeights& w_;
  KvPool pool_;
  std::shared_ptr<ThreadPool> threads_ptr_;
  ThreadPool& threads_;
  const MatMulActivations act_;  // --cpu-activations
  std::vector<std::unique_ptr<float[]>> k_cache_;  // [n_layer][num_blocks * kv_dim * block_size] (cpu::StoreKeys)
  std::vector<std::unique_ptr<float[]>> v_cache_;

  // Activations of the current pass, reused across calls.
  int64_t T_ = 0;
  std::vector<int32_t> pos_, seq_of_;
  std::vector<int64_t> seq_first_;
  std::vector<float> x_, xn_, q_, k_, v_, attn_, proj_, gate_, up_, hidden_;
  std::vector<float> rope_cs_;  // [T, rope_dim / 2, 2], computed at layer 0
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> MakeCpuBackend(const Model& model, const BackendOptions& opts) {
  if (opts.threads < 1 || opts.threads > 256) {
    return absl::InvalidArgumentError(absl::StrCat("threads must be in [1, 256], got ", opts.threads));
  }
  if (opts.kv_block_size < 1 || opts.kv_block_size > 1024) {
    return absl::InvalidArgumentError("kv_block_size must be in [1, 1024]");
  }
  int32_t blocks = opts.kv_blocks;
  const int64_t bytes_per_position = 2 * int64_t{model.config.n_layer} * model.config.kv_dim() * sizeof(float);
  if (blocks <= 0) blocks = DefaultKvBlocks(model.config, opts, bytes_per_position);
  if (opts.cpu_activations == MatMulActivations::kInt8 && !cpu::PackedKernelRuns(GgmlType::kQ8_0)) {
    log::Warn("--cpu-activations int8: this CPU has neither AVX-512 VNNI nor AVX2, so the portable int8 "
              "kernel runs: the same results, several times slower than fp32 here");
  }
  return std::unique_ptr<Backend>(new CpuBackend(model, opts, blocks));
}

}  // namespace specserve
