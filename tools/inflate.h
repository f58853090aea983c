// Model inflation: turns a small Llama model into a large one with the
// matrix shapes of a real model (Llama-3.1-8B, Llama-3.2-1B) that computes
// the same function, up to the f16 rounding of the rotated weights. Tiny
// models are launch-bound on a GPU; an inflated one reads as many bytes per
// token as the real thing, so decode and verify timings are those of the
// regime speculative decoding is about, and its acceptance is the small
// pair's. (Header-only: tools/*.cc all go into the CLI binary.)
//
// With d -> D residual width, the residual stream of the big model is
// x' = R [x; 0] for a random orthogonal R = H diag(s) / sqrt(D) (Sylvester
// Hadamard H, random signs s: a randomised Hadamard transform, as in QuaRot,
// Ashkboos et al. 2024), which is applied in O(D log D) per vector, so D must
// be a power of two. Every vector that enters or leaves the stream goes
// through T(v) = R [v; 0]:
//   - embedding rows: T(e);
//   - matrices reading the stream (q, k, v, gate, up, output): each row w
//     becomes sqrt(d/D) T(w * g), with the RMSNorm gain g folded in (the new
//     gains are 1) and eps scaled by d/D, because RMS over D dims of x' is
//     sqrt(d/D) times RMS over d dims of x;
//   - matrices writing to the stream (attn_output, ffn_down): each column c
//     becomes T(c).
// Added heads, feed-forward rows and layers contribute exactly zero:
//   - original query head j of kv group j / g0 becomes head (j / g0) * g + j % g0
//     of the new group size g >= g0; the other heads of the original groups
//     have zero attn_output columns; heads of added kv heads read zero values;
//   - added feed-forward units have zero gate rows (silu(0) * up = 0);
//   - added layers have zero value projections and zero gate rows.
// Everything that cannot matter is filled with small random values, so the
// big model does the same arithmetic as a real one.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/fp16.h"
#include "common/thread_pool.h"
#include "common/weights.h"
#include "kernels/cpu_matmul.h"

namespace specserve::inflate {

struct Shape {
  int32_t n_embd = 0;     // power of two, >= the small model's
  int32_t n_layer = 0;    // >= the small model's
  int32_t n_head = 0;     // query heads, head_dim unchanged
  int32_t n_head_kv = 0;  // >= the small model's; n_head / n_head_kv >= the small group
  int32_t n_ff = 0;       // >= the small model's
};

// About Llama-3.1-8B's matrix shapes (q 4096x4096, kv 1024x4096, ffn
// 14336x4096, 32 layers) for a model with head_dim 64; 1B likewise.
inline Shape Llama8BShape(int32_t head_dim) { return {4096, 32, 4096 / head_dim, 1024 / head_dim, 14336}; }
inline Shape Llama1BShape(int32_t head_dim) { return {2048, 16, 2048 / head_dim, 512 / head_dim, 8192}; }

// The big model: config and views, and the storage they point into.
struct Inflated {
  Model model;
  std::vector<std::unique_ptr<std::vector<uint16_t>>> f16;  // matrices
  std::vector<float> ones;                                  // every norm gain
  std::vector<float> rope_freqs;                            // a copy of the small model's, if any
};

namespace internal {

// In-place unnormalised fast Walsh-Hadamard transform of x[0, n), n a power of two.
inline void Fwht(float* x, int64_t n) {
  for (int64_t h = 1; h < n; h *= 2) {
    for (int64_t i = 0; i < n; i += 2 * h) {
      for (int64_t j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
}

class Builder {
 public:
  Builder(const Model& small, const Shape& s, uint64_t seed, Inflated* out)
      : small_(small), c0_(small.config), s_(s), out_(out), pool_(std::max(1u, std::thread::hardware_concurrency())) {
    std::mt19937_64 rng(seed);
    signs_.resize(s.n_embd);
    for (float& v : signs_) v = (rng() & 1) ? 1.0f : -1.0f;
    noise_.resize(size_t{1} << 20);  // a block of small random halves, copied around
    std::uniform_real_distribution<float> u(-0.02f, 0.02f);
    for (uint16_t& h : noise_) h = F32ToF16(u(rng));
    rng_ = rng;
  }

  absl::Status Build() {
    const ModelConfig& c = c0_;
    const int32_t D = s_.n_embd, hd = c.head_dim;
    if (D < c.n_embd || (D & (D - 1)) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("n_embd ", D, " must be a power of two >= ", c.n_embd));
    }
    if (s_.n_layer < c.n_layer || s_.n_ff < c.n_ff || s_.n_head_kv < c.n_head_kv || s_.n_head_kv < 1 ||
        s_.n_head % s_.n_head_kv != 0 || s_.n_head / s_.n_head_kv < c.n_head / c.n_head_kv) {
      return absl::InvalidArgumentError("inflate: the big shape must contain the small one");
    }
    if (c.qkv_bias) return absl::UnimplementedError("inflate: models with q/k/v biases are not supported");
    ModelConfig& big = out_->model.config;
    big = c;
    big.name = absl::StrCat(c.name, " inflated to ", D, "x", s_.n_layer);
    big.n_embd = D;
    big.n_layer = s_.n_layer;
    big.n_head = s_.n_head;
    big.n_head_kv = s_.n_head_kv;
    big.n_ff = s_.n_ff;
    big.rms_eps = c.rms_eps * static_cast<float>(c.n_embd) / D;
    big.tied_output = false;
    scale_ = std::sqrt(static_cast<float>(c.n_embd) / D);
    out_->ones.assign(std::max(D, s_.n_ff), 1.0f);

    ModelWeights& w = out_->model.weights;
    const ModelWeights& w0 = small_.weights;
    w.tok_embd = Matrix(c.vocab, D);
    RowsFrom(w.tok_embd, 0, w0.tok_embd, 0, c.vocab, nullptr, 1.0f);
    w.output = Matrix(c.vocab, D);
    RowsFrom(w.output, 0, w0.output, 0, c.vocab, w0.output_norm, scale_);
    w.output_norm = out_->ones.data();
    if (w0.rope_freqs != nullptr) {  // per head dimension: unchanged by the inflation
      out_->rope_freqs.assign(w0.rope_freqs, w0.rope_freqs + c.rope_dim / 2);
      w.rope_freqs = out_->rope_freqs.data();
    }
    w.layers.resize(s_.n_layer);
    const int32_t g0 = c.n_head / c.n_head_kv, g = s_.n_head / s_.n_head_kv;
    for (int32_t l = 0; l < s_.n_layer; ++l) {
      LayerWeights& L = w.layers[l];
      L.attn_norm = L.ffn_norm = out_->ones.data();
      L.wq = Matrix(int64_t{s_.n_head} * hd, D);
      L.wk = Matrix(int64_t{s_.n_head_kv} * hd, D);
      L.wv = Matrix(int64_t{s_.n_head_kv} * hd, D);
      L.wo = Matrix(D, int64_t{s_.n_head} * hd);
      L.gate = Matrix(s_.n_ff, D);
      L.up = Matrix(s_.n_ff, D);
      L.down = Matrix(D, s_.n_ff);
      Noise(L.wq);
      Noise(L.wk);
      Zero(L.wv);
      Noise(L.wo);
      Zero(L.gate);
      Noise(L.up);
      Noise(L.down);
      if (l >= c.n_layer) continue;  // an added layer: zero values, zero gates
      const LayerWeights& S = w0.layers[l];
      for (int32_t j = 0; j < c.n_head; ++j) {
        const int64_t nh = int64_t{j / g0} * g + j % g0;
        RowsFrom(L.wq, nh * hd, S.wq, int64_t{j} * hd, hd, S.attn_norm, scale_);
        ColumnsFrom(L.wo, nh * hd, S.wo, int64_t{j} * hd, hd);
      }
      for (int32_t kh = 0; kh < c.n_head_kv; ++kh) {  // unmapped heads of original groups: no output
        for (int32_t r = g0; r < g; ++r) ZeroColumns(L.wo, (int64_t{kh} * g + r) * hd, hd);
      }
      RowsFrom(L.wk, 0, S.wk, 0, int64_t{c.n_head_kv} * hd, S.attn_norm, scale_);
      RowsFrom(L.wv, 0, S.wv, 0, int64_t{c.n_head_kv} * hd, S.attn_norm, scale_);
      RowsFrom(L.gate, 0, S.gate, 0, c.n_ff, S.ffn_norm, scale_);
      RowsFrom(L.up, 0, S.up, 0, c.n_ff, S.ffn_norm, scale_);
      ColumnsFrom(L.down, 0, S.down, 0, c.n_ff);
    }
    return absl::OkStatus();
  }

 private:
  MatrixView Matrix(int64_t rows, int64_t cols) {
    out_->f16.push_back(std::make_unique<std::vector<uint16_t>>(static_cast<size_t>(rows * cols)));
    return MatrixView{GgmlType::kF16, reinterpret_cast<const uint8_t*>(out_->f16.back()->data()), rows, cols,
                      static_cast<uint64_t>(cols * 2)};
  }
  static uint16_t* Data(const MatrixView& m) { return reinterpret_cast<uint16_t*>(const_cast<uint8_t*>(m.data)); }

  void Zero(const MatrixView& m) { std::memset(Data(m), 0, static_cast<size_t>(m.rows * m.cols) * 2); }
  void Noise(const MatrixView& m) {
    uint16_t* p = Data(m);
    const size_t n = static_cast<size_t>(m.rows * m.cols), block = noise_.size();
    for (size_t i = 0; i < n;) {
      const size_t off = rng_() % block, len = std::min(n - i, block - off);
      std::memcpy(p + i, noise_.data() + off, len * 2);
      i += len;
    }
  }
  void ZeroColumns(const MatrixView& m, int64_t c0, int64_t n) {
    for (int64_t r = 0; r < m.rows; ++r) std::memset(Data(m) + r * m.cols + c0, 0, n * 2);
  }

  // out = T(v * gain) * scale: R [v; 0] with R = H diag(signs) / sqrt(D).
  void Transform(const float* v, const float* gain, float scale, float* out) const {
    const int64_t d = c0_.n_embd, D = s_.n_embd;
    for (int64_t i = 0; i < D; ++i) out[i] = i < d ? v[i] * (gain ? gain[i] : 1.0f) * signs_[i] : 0.0f;
    Fwht(out, D);
    const float k = scale / std::sqrt(static_cast<float>(D));
    for (int64_t i = 0; i < D; ++i) out[i] *= k;
  }

  // Rows [r0, r0 + n) of dst = transformed rows [s0, s0 + n) of src (which read the stream).
  void RowsFrom(const MatrixView& dst, int64_t r0, const MatrixView& src, int64_t s0, int64_t n, const float* gain,
                float scale) {
    pool_.ParallelFor(n, 4, [&](int64_t begin, int64_t end) {
      std::vector<float> row(src.cols), t(dst.cols);
      for (int64_t i = begin; i < end; ++i) {
        DequantizeMatrixRow(src, s0 + i, row.data());
        Transform(row.data(), gain, scale, t.data());
        uint16_t* o = Data(dst) + (r0 + i) * dst.cols;
        for (int64_t j = 0; j < dst.cols; ++j) o[j] = F32ToF16(t[j]);
      }
    });
  }

  // Columns [c0, c0 + n) of dst = transformed columns [s0, s0 + n) of src
  // (which write to the stream: its rows are the d stream dimensions).
  void ColumnsFrom(const MatrixView& dst, int64_t c0, const MatrixView& src, int64_t s0, int64_t n) {
    std::vector<float> full(static_cast<size_t>(src.rows * src.cols));
    for (int64_t r = 0; r < src.rows; ++r) DequantizeMatrixRow(src, r, full.data() + r * src.cols);
    pool_.ParallelFor(n, 4, [&](int64_t begin, int64_t end) {
      std::vector<float> col(src.rows), t(dst.rows);
      for (int64_t i = begin; i < end; ++i) {
        for (int64_t r = 0; r < src.rows; ++r) col[r] = full[r * src.cols + s0 + i];
        Transform(col.data(), nullptr, 1.0f, t.data());
        for (int64_t r = 0; r < dst.rows; ++r) Data(dst)[r * dst.cols + c0 + i] = F32ToF16(t[r]);
      }
    });
  }

  const Model& small_;
  const ModelConfig& c0_;
  const Shape s_;
  Inflated* out_;
  ThreadPool pool_;
  std::vector<float> signs_;
  std::vector<uint16_t> noise_;
  std::mt19937_64 rng_;
  float scale_ = 1.0f;
};

}  // namespace internal

// The big model computing small's function. Needs host memory for all of it
// (about 14 GB for the 8B shape). INVALID_ARGUMENT when the shape does not
// contain the small one or n_embd is not a power of two.
inline absl::StatusOr<std::unique_ptr<Inflated>> Inflate(const Model& small, const Shape& shape,
                                                         uint64_t seed = 1) {
  auto out = std::make_unique<Inflated>();
  internal::Builder b(small, shape, seed, out.get());
  absl::Status s = b.Build();
  if (!s.ok()) return s;
  return out;
}

}  // namespace specserve::inflate
