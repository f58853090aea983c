#include "backends/cpu_eagle.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cpu_matmul.h"
#include "kernels/cpu_ops.h"

namespace specserve {
namespace {

int32_t Argmax(const float* row, int32_t n) { return static_cast<int32_t>(std::max_element(row, row + n) - row); }

}  // namespace

CpuEagleHead::CpuEagleHead(const EagleHead& head, const Model& target, ThreadPool& pool)
    : c_(head.config), w_(head.weights), target_(target), pool_(pool) {}

absl::Status CpuEagleHead::Append(EagleSeq& seq, absl::Span<const TokenId> tokens, const float* features,
                                  std::vector<float>* h) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t d = c_.n_embd, kvd = c_.kv_dim();
  if (seq.length + n > c_.n_ctx) {
    return absl::InvalidArgumentError(absl::StrCat("eagle head: ", seq.length + n, " positions exceed its context ",
                                                   c_.n_ctx));
  }
  for (TokenId t : tokens) {
    if (t < 0 || t >= target_.config.vocab) return absl::InvalidArgumentError(absl::StrCat("eagle head: token ", t));
  }
  in_.resize(n * 2 * d);
  for (int64_t i = 0; i < n; ++i) {
    DequantizeMatrixRow(target_.weights.tok_embd, tokens[i], in_.data() + i * 2 * d);
    std::copy_n(features + i * d, d, in_.data() + i * 2 * d + d);
  }
  x_.resize(n * d);
  xn_.resize(n * d);
  q_.resize(n * d);
  k_.resize(n * kvd);
  v_.resize(n * kvd);
  attn_.resize(n * d);
  proj_.resize(n * d);
  gate_.resize(n * c_.n_ff);
  up_.resize(n * c_.n_ff);
  MatMul(w_.fc, in_.data(), n, x_.data(), pool_);
  const LayerWeights& L = w_.layer;
  cpu::RmsNorm(x_.data(), L.attn_norm, xn_.data(), n, d, c_.rms_eps);
  MatMul(L.wq, xn_.data(), n, q_.data(), pool_);
  MatMul(L.wk, xn_.data(), n, k_.data(), pool_);
  MatMul(L.wv, xn_.data(), n, v_.data(), pool_);
  pos_.resize(n);
  for (int64_t i = 0; i < n; ++i) pos_[i] = seq.length + static_cast<int32_t>(i);
  const cpu::RopeParams rq{c_.n_head, c_.head_dim, c_.head_dim, c_.rope_base, false};
  const cpu::RopeParams rk{c_.n_head_kv, c_.head_dim, c_.head_dim, c_.rope_base, false};
  cs_.resize(n * c_.head_dim);
  cpu::RopeAngles(pos_.data(), n, rq, cs_.data());
  cpu::RopeApply(q_.data(), n, rq, cs_.data());
  cpu::RopeApply(k_.data(), n, rk, cs_.data());
  const size_t need = static_cast<size_t>(seq.length + n) * kvd;
  if (seq.k.size() < need) seq.k.resize(std::max(need, seq.k.size() * 2)), seq.v.resize(seq.k.size());
  std::copy_n(k_.data(), n * kvd, seq.k.data() + static_cast<int64_t>(seq.length) * kvd);
  std::copy_n(v_.data(), n * kvd, seq.v.data() + static_cast<int64_t>(seq.length) * kvd);
  seq.length += static_cast<int32_t>(n);
  Attend(seq, n);
  MatMul(L.wo, attn_.data(), n, proj_.data(), pool_);
  cpu::AddInPlace(x_.data(), proj_.data(), n * d);
  cpu::RmsNorm(x_.data(), L.ffn_norm, xn_.data(), n, d, c_.rms_eps);
  MatMul(L.gate, xn_.data(), n, gate_.data(), pool_);
  MatMul(L.up, xn_.data(), n, up_.data(), pool_);
  cpu::SwiGlu(gate_.data(), up_.data(), gate_.data(), n * c_.n_ff);
  MatMul(L.down, gate_.data(), n, proj_.data(), pool_);
  cpu::AddInPlace(x_.data(), proj_.data(), n * d);
  h->assign(x_.begin(), x_.end());
  return absl::OkStatus();
}

// Causal attention of the n newest positions (already in seq) over the
// window that ends at each: attn_ [n, n_head * head_dim].
void CpuEagleHead::Attend(const EagleSeq& seq, int64_t n) {
  const int64_t hd = c_.head_dim, kvd = c_.kv_dim(), group = c_.n_head / c_.n_head_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  scores_.resize(seq.length);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = seq.length - n + i;
    // The head attends to the last `window` positions (0: all of them).
    const int64_t first = c_.window > 0 ? std::max<int64_t>(0, p - c_.window + 1) : 0;
    for (int64_t hq = 0; hq < c_.n_head; ++hq) {
      const float* q = q_.data() + i * c_.n_embd + hq * hd;
      const int64_t off = (hq / group) * hd;
      float mx = -INFINITY;
      for (int64_t j = first; j <= p; ++j) {
        const float* kj = seq.k.data() + j * kvd + off;
        float s = 0;
        for (int64_t e = 0; e < hd; ++e) s += q[e] * kj[e];
        scores_[j] = s * scale;
        mx = std::max(mx, scores_[j]);
      }
      float sum = 0;
      for (int64_t j = first; j <= p; ++j) sum += scores_[j] = std::exp(scores_[j] - mx);
      float* out = attn_.data() + i * c_.n_embd + hq * hd;
      std::fill(out, out + hd, 0.0f);
      for (int64_t j = first; j <= p; ++j) {
        const float a = scores_[j] / sum;
        const float* vj = seq.v.data() + j * kvd + off;
        for (int64_t e = 0; e < hd; ++e) out[e] += a * vj[e];
      }
    }
  }
}

void CpuEagleHead::Readout(const float* h, int64_t rows, std::vector<float>* logits) {
  const ModelConfig& tc = target_.config;
  hidden_.resize(rows * tc.n_embd);
  cpu::RmsNorm(h, target_.weights.output_norm, hidden_.data(), rows, tc.n_embd, tc.rms_eps);
  logits->resize(rows * tc.vocab);
  MatMul(target_.weights.output, hidden_.data(), rows, logits->data(), pool_);
}

absl::StatusOr<EagleRunStats> GreedySelfSpeculate(Backend& target, CpuEagleHead* head,
                                                  absl::Span<const TokenId> prompt, int32_t max_tokens, int32_t k) {
  if (prompt.empty()) return absl::InvalidArgumentError("empty prompt");
  if (k < 0 || k > 16 || (k > 0 && head == nullptr)) return absl::InvalidArgumentError("k must be 0..16, with a head");
  const int32_t vocab = target.config().vocab, d = target.config().n_embd;
  EagleRunStats st;
  KvSeq kv;
  EagleSeq hs;
  std::vector<float> logits, feats, h, hl;
  // The prefill: every prompt token but the last (the pending one).
  TokenId pending = prompt.back();
  const auto before = prompt.first(prompt.size() - 1);
  auto release = [&] { target.kv_pool().Release(kv); };
  if (!before.empty()) {
    absl::Status s = target.ForwardFeatures({ForwardSeq{&kv, before, static_cast<int32_t>(before.size())}}, &logits,
                                            &feats);
    if (!s.ok()) return release(), s;
    if (head != nullptr) {
      if (s = head->Append(hs, prompt.subspan(1), feats.data(), &h); !s.ok()) return release(), s;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<TokenId> pass;
  while (static_cast<int32_t>(st.tokens.size()) < max_tokens) {
    const int32_t kk = std::min<int32_t>(k, max_tokens - static_cast<int32_t>(st.tokens.size()) - 1);
    pass.assign(1, pending);
    // Draft: d1 from the last real position's output, then the head's own
    // outputs as the features of the drafted positions.
    if (kk > 0 && !h.empty()) {
      std::vector<float> last(h.end() - d, h.end());
      for (int32_t j = 0; j < kk; ++j) {
        head->Readout(last.data(), 1, &hl);
        pass.push_back(Argmax(hl.data(), vocab));
        if (j + 1 == kk) break;
        if (absl::Status s = head->Append(hs, {pass.back()}, last.data(), &last); !s.ok()) return release(), s;
      }
    }
    const int32_t n_in = static_cast<int32_t>(pass.size());
    const int32_t at = kv.length;
    absl::Status s = target.ForwardFeatures({ForwardSeq{&kv, pass, n_in}}, &logits, &feats);
    if (!s.ok()) return release(), s;
    ++st.target_passes;
    int32_t n = 0;
    while (n + 1 < n_in && Argmax(logits.data() + int64_t{n} * vocab, vocab) == pass[n + 1]) ++n;
    const TokenId next = Argmax(logits.data() + int64_t{n} * vocab, vocab);
    st.drafted += n_in - 1;
    st.accepted += n;
    for (int32_t j = 1; j <= n; ++j) st.tokens.push_back(pass[j]);
    st.tokens.push_back(next);
    target.kv_pool().Truncate(kv, at + n + 1);
    if (head != nullptr) {
      // The committed positions at..at+n, with their real features.
      head->Truncate(hs, at);
      std::vector<TokenId> next_tokens(pass.begin() + 1, pass.begin() + 1 + n);
      next_tokens.push_back(next);
      if (s = head->Append(hs, next_tokens, feats.data(), &h); !s.ok()) return release(), s;
    }
    pending = next;
  }
  st.decode_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (static_cast<int32_t>(st.tokens.size()) > max_tokens) st.tokens.resize(max_tokens);
  release();
  return st;
}

}  // namespace specserve
