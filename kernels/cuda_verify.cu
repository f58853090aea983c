#include "kernels/cuda_verify.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cuda_sampling_device.cuh"
#include "spec/rng.h"

namespace specserve::cuda {
namespace {

struct RowStat {
  double psum;     // sum of the row's p in ascending id order (SampleFromProbs' total)
  int32_t argmax;  // Argmax of the logits
  int32_t plast;   // last id with p > 0, -1 if none
};

struct KernelParams {
  VerifyBatchArgs a;
  float* probs;    // [batch, max_k + 1, vocab] p rows (e before normalisation)
  float* resid;    // [batch, vocab] residual max(0, p - q)
  RowStat* stats;  // [batch, max_k + 1]
};

// Entries [QBegin, QEnd) of draft token j's sparse q, clamped to the arrays
// (VerifyBatchArgs::q_count): bad offsets give an empty q, never a read
// outside q_ids / q_probs.
__device__ __forceinline__ int QBegin(const VerifyBatchArgs& a, int j) {
  return min(max(a.q_offsets[j], 0), a.q_count);
}
__device__ __forceinline__ int QEnd(const VerifyBatchArgs& a, int j) {
  return max(QBegin(a, j), min(a.q_offsets[j + 1], a.q_count));
}

// Row i of sequence b in a.logits (see VerifyBatchArgs::logits_row).
__device__ __forceinline__ int64_t LogitsRow(const VerifyBatchArgs& a, int b, int i) {
  if (a.logits_row == nullptr) return static_cast<int64_t>(b) * (a.max_k + 1) + i;
  const int64_t r = a.logits_row[b] + i;
  return r < 0 ? 0 : r >= a.logits_rows ? a.logits_rows - 1 : r;
}

// --- Kernel 1: TargetDistribution of one row ------------------------------

__global__ void __launch_bounds__(kThreads) TargetRowKernel(KernelParams kp) {
  __shared__ Shared sh;
  const VerifyBatchArgs& a = kp.a;
  const int b = blockIdx.y, i = blockIdx.x;
  const int kb = min(max(a.k[b], 0), a.max_k);
  if (i > kb) return;
  const int V = a.vocab;
  const int64_t row = static_cast<int64_t>(b) * (a.max_k + 1) + i;
  const float* logits = a.logits + LogitsRow(a, b, i) * V;
  float* p = kp.probs + row * V;
  RowStat* stat = kp.stats + row;
  const SamplingParams P = a.params[b];

  const int best = BlockArgmax(logits, V, sh);
  if (threadIdx.x == 0) {
    stat->argmax = best;
    stat->psum = 0.0;
    stat->plast = -1;
  }
  const float t = P.temperature;
  if (!(t > 0.0f)) return;  // greedy: only the argmax is used
  const float max_logit = logits[best];
  if (!isfinite(max_logit)) {  // no finite maximum: one-hot at the argmax
    for (int x = threadIdx.x; x < V; x += blockDim.x) p[x] = x == best ? 1.0f : 0.0f;
    if (threadIdx.x == 0) {
      stat->psum = 1.0;
      stat->plast = best;
    }
    return;
  }
  const bool use_top_k = P.top_k > 0 && P.top_k < V;
  const bool use_top_p = P.top_p < 1.0f;
  const uint64_t kth = use_top_k ? SelectKth(logits, V, 0, ~0ull, static_cast<unsigned>(P.top_k), sh) : 0;
  for (int x = threadIdx.x; x < V; x += blockDim.x) {
    const float l = logits[x];
    p[x] = (!use_top_k || RankKey(l, x) >= kth) ? Weight(l, max_logit, t) : 0.0f;
  }
  __syncthreads();
  auto value = [p](int x) { return p[x]; };
  if (use_top_p) {
    const double target = __dmul_rn(static_cast<double>(P.top_p), OrderedSum(V, value, sh));
    const uint64_t cutoff = TopPCutoff(logits, V, use_top_k ? kth : 0, use_top_k ? P.top_k : V, p, target, sh);
    for (int x = threadIdx.x; x < V; x += blockDim.x) {
      if (p[x] != 0.0f && RankKey(logits[x], x) < cutoff) p[x] = 0.0f;
    }
    __syncthreads();
  }
  const double total = OrderedSum(V, value, sh);  // >= 1: the argmax has weight expf(0)
  for (int x = threadIdx.x; x < V; x += blockDim.x) {
    p[x] = __double2float_rn(__ddiv_rn(static_cast<double>(p[x]), total));
  }
  __syncthreads();
  double psum = 0.0;
  int last = -1;
  OrderedVisit(V, value, [&](int x, float v) {
    psum = __dadd_rn(psum, static_cast<double>(v));
    last = x;
    return false;
  }, sh);
  if (threadIdx.x == 0) {
    stat->psum = psum;
    stat->plast = last;
  }
}

// --- Kernel 2: the accept tests and the final draw of one sequence --------

enum Mode : int { kSampleP = 0, kResidual = 1 };

// The per-position flags of sequence b: d_{i+1} accepted iff i < n.
__device__ __forceinline__ void WriteAcceptFlags(const VerifyBatchArgs& a, int b, int n) {
  if (a.accept_flags == nullptr) return;
  uint8_t* f = a.accept_flags + static_cast<int64_t>(b) * a.max_k;
  for (int i = 0; i < a.max_k; ++i) f[i] = i < n ? 1 : 0;
}

__global__ void __launch_bounds__(kThreads) DecideKernel(KernelParams kp) {
  __shared__ Shared sh;
  const VerifyBatchArgs& a = kp.a;
  const int b = blockIdx.x;
  const int V = a.vocab, K = a.max_k;
  const int kb = min(max(a.k[b], 0), K);
  const SamplingParams P = a.params[b];
  const uint64_t first = a.first_position[b];
  const int64_t row0 = static_cast<int64_t>(b) * (K + 1);
  const int32_t* drafts = a.draft_tokens + static_cast<int64_t>(b) * K;

  if (!(P.temperature > 0.0f)) {  // greedy: accept while d_i == argmax of row i
    if (threadIdx.x == 0) {
      int n = kb, x = kp.stats[row0 + kb].argmax;
      for (int i = 0; i < kb; ++i) {
        const int best = kp.stats[row0 + i].argmax;
        if (drafts[i] != best) {
          n = i;
          x = best;
          break;
        }
      }
      a.accepted[b] = n;
      a.next_token[b] = x;
      WriteAcceptFlags(a, b, n);
    }
    return;
  }

  // One thread walks the accept tests in order, as Verify does.
  if (threadIdx.x == 0) {
    int n = kb, mode = kSampleP, q = -1;
    int64_t r = row0 + kb;
    float u = UniformFloat(P.seed, first + kb, RngPurpose::kTargetSample);  // bonus
    for (int i = 0; i < kb; ++i) {
      const uint64_t pos = first + i;
      const int d = drafts[i];
      const int j = b * K + i;
      float qd = 0.0f;  // SparseProb: the first entry listing d
      const int e_end = QEnd(a, j);
      for (int e = QBegin(a, j); e < e_end; ++e) {
        if (a.q_ids[e] == d) {
          qd = a.q_probs[e];
          break;
        }
      }
      if (!(qd > 0.0f)) {  // d was not drawn from q: a rejection that ignores d
        n = i;
        r = row0 + i;
        u = UniformFloat(P.seed, pos, RngPurpose::kResample);
        break;
      }
      const float pd = (d >= 0 && d < V) ? kp.probs[(row0 + i) * V + d] : 0.0f;
      if (UniformFloat(P.seed, pos, RngPurpose::kAccept) < __fdiv_rn(pd, qd)) continue;
      n = i;
      mode = kResidual;
      r = row0 + i;
      q = j;
      u = UniformFloat(P.seed, pos, RngPurpose::kResample);
      break;
    }
    sh.i32[0] = n;
    sh.i32[1] = mode;
    sh.i32[2] = q;
    sh.u64 = static_cast<uint64_t>(r);
    sh.f32 = u;
  }
  __syncthreads();
  const int n = sh.i32[0], mode = sh.i32[1], q = sh.i32[2];
  const int64_t r = static_cast<int64_t>(sh.u64);
  const float u = sh.f32;
  __syncthreads();

  const float* p = kp.probs + r * V;
  const RowStat stat = kp.stats[r];
  auto p_value = [p](int x) { return p[x]; };
  int x;
  if (mode == kResidual) {
    // r_x = max(0, p[x] - q(x)); x outside q keeps p[x].
    float* res = kp.resid + static_cast<int64_t>(b) * V;
    for (int i = threadIdx.x; i < V; i += blockDim.x) res[i] = p[i];
    __syncthreads();
    const int e_end = QEnd(a, q);
    for (int e = QBegin(a, q) + threadIdx.x; e < e_end; e += blockDim.x) {
      const int id = a.q_ids[e];
      if (id >= 0 && id < V) {
        const float d = __fsub_rn(p[id], a.q_probs[e]);
        res[id] = d > 0.0f ? d : 0.0f;
      }
    }
    __syncthreads();
    double total = 0.0;
    int last = -1;
    auto res_value = [res](int i) { return res[i]; };
    OrderedVisit(V, res_value, [&](int i, float v) {
      total = __dadd_rn(total, static_cast<double>(v));
      last = i;
      return false;
    }, sh);
    if (threadIdx.x == 0) {
      sh.f64 = total;
      sh.i32[3] = last;
    }
    __syncthreads();
    total = sh.f64;
    last = sh.i32[3];
    __syncthreads();
    // A massless residual (p <= q up to rounding) samples from p: see verify.h.
    x = last < 0 ? SampleOrdered(p_value, stat.psum, stat.plast, u, sh)
                 : SampleOrdered(res_value, total, last, u, sh);
  } else {
    x = SampleOrdered(p_value, stat.psum, stat.plast, u, sh);
  }
  if (threadIdx.x == 0) {
    a.accepted[b] = n;
    a.next_token[b] = x;
    WriteAcceptFlags(a, b, n);
  }
}

size_t Align(size_t b) { return (b + 255) / 256 * 256; }

struct WorkspaceLayout {
  size_t probs, resid, stats, total;
};

WorkspaceLayout Layout(int32_t batch, int32_t max_k, int32_t vocab) {
  const size_t rows = static_cast<size_t>(batch) * (max_k + 1);
  WorkspaceLayout l;
  l.probs = 0;
  l.resid = Align(rows * vocab * sizeof(float));
  l.stats = l.resid + Align(static_cast<size_t>(batch) * vocab * sizeof(float));
  l.total = l.stats + Align(rows * sizeof(RowStat));
  return l;
}

}  // namespace

size_t VerifyWorkspaceBytes(int32_t batch, int32_t max_k, int32_t vocab) {
  if (batch <= 0 || max_k < 0 || vocab <= 0) return 0;
  return Layout(batch, max_k, vocab).total;
}

absl::Status LaunchVerifyResample(const VerifyBatchArgs& a, cudaStream_t stream) {
  if (a.batch < 0 || a.batch > 65535) return absl::InvalidArgumentError("verify: batch must be in [0, 65535]");
  if (a.max_k < 0 || a.max_k > kMaxVerifyK) {
    return absl::InvalidArgumentError(absl::StrCat("verify: max_k must be in [0, ", kMaxVerifyK, "]"));
  }
  if (a.vocab < 1) return absl::InvalidArgumentError("verify: vocab must be >= 1");
  if (a.batch == 0) return absl::OkStatus();
  if (a.logits == nullptr || a.k == nullptr || a.params == nullptr || a.first_position == nullptr ||
      a.accepted == nullptr || a.next_token == nullptr) {
    return absl::InvalidArgumentError("verify: null pointer");
  }
  if (a.max_k > 0 && (a.draft_tokens == nullptr || a.q_offsets == nullptr || a.q_ids == nullptr ||
                      a.q_probs == nullptr)) {
    return absl::InvalidArgumentError("verify: draft arrays are required when max_k > 0");
  }
  if (a.q_count < 0) return absl::InvalidArgumentError("verify: q_count must be >= 0");
  if (a.logits_row != nullptr && a.logits_rows < 1) {
    return absl::InvalidArgumentError("verify: logits_rows must be >= 1 with logits_row");
  }
  const WorkspaceLayout l = Layout(a.batch, a.max_k, a.vocab);
  if (a.workspace == nullptr || a.workspace_bytes < l.total) {
    return absl::InvalidArgumentError("verify: workspace too small");
  }
  KernelParams kp;
  kp.a = a;
  char* ws = static_cast<char*>(a.workspace);
  kp.probs = reinterpret_cast<float*>(ws + l.probs);
  kp.resid = reinterpret_cast<float*>(ws + l.resid);
  kp.stats = reinterpret_cast<RowStat*>(ws + l.stats);
  TargetRowKernel<<<dim3(a.max_k + 1, a.batch), kThreads, 0, stream>>>(kp);
  RETURN_IF_ERROR(CheckLaunch("TargetRowKernel"));
  DecideKernel<<<a.batch, kThreads, 0, stream>>>(kp);
  return CheckLaunch("DecideKernel");
}

DeviceVerifier::~DeviceVerifier() {
  if (start_ != nullptr) cudaEventDestroy(start_);
  if (stop_ != nullptr) cudaEventDestroy(stop_);
}

absl::StatusOr<std::vector<VerifyResult>> DeviceVerifier::Run(absl::Span<const VerifyInput> inputs,
                                                              cudaStream_t stream, DeviceVerifyStats* stats) {
  for (size_t b = 0; b < inputs.size(); ++b) {
    const absl::Status s = ValidateVerifyInput(inputs[b]);
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("sequence ", b, ": ", s.message()));
  }
  if (inputs.empty()) return std::vector<VerifyResult>();
  const int32_t V = inputs[0].vocab;
  int32_t K = 0;
  for (const VerifyInput& in : inputs) K = std::max(K, in.k);
  const size_t row_floats = static_cast<size_t>(K + 1) * V;
  RETURN_IF_ERROR(logits_.Reserve(inputs.size() * row_floats * sizeof(float)));
  for (size_t b = 0; b < inputs.size(); ++b) {
    if (inputs[b].vocab != V) return absl::InvalidArgumentError("verify: every sequence of a batch needs the same vocab");
    SPECSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(logits_.as<float>() + b * row_floats, inputs[b].target_logits,
                                                   static_cast<size_t>(inputs[b].k + 1) * V * sizeof(float),
                                                   cudaMemcpyHostToDevice, stream));
  }
  return Launch(inputs, logits_.as<float>(), {}, static_cast<int64_t>(inputs.size()) * (K + 1), stream, stats);
}

absl::StatusOr<std::vector<VerifyResult>> DeviceVerifier::RunOnDevice(absl::Span<const VerifyInput> inputs,
                                                                      const float* logits,
                                                                      absl::Span<const int64_t> logits_row,
                                                                      int64_t rows, cudaStream_t stream,
                                                                      DeviceVerifyStats* stats) {
  if (logits_row.size() != inputs.size()) return absl::InvalidArgumentError("verify: one logits row per sequence");
  if (logits == nullptr && !inputs.empty()) return absl::InvalidArgumentError("verify: null device logits");
  static const float kSomeLogits = 0.0f;  // the rows are on the device; ValidateVerifyInput wants a pointer
  for (size_t b = 0; b < inputs.size(); ++b) {
    VerifyInput in = inputs[b];
    in.target_logits = &kSomeLogits;
    const absl::Status s = ValidateVerifyInput(in);
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("sequence ", b, ": ", s.message()));
    if (logits_row[b] < 0 || logits_row[b] + in.k + 1 > rows) {
      return absl::InvalidArgumentError(absl::StrCat("verify: sequence ", b, "'s rows [", logits_row[b], ", ",
                                                     logits_row[b] + in.k + 1, ") leave the ", rows, " logits rows"));
    }
  }
  return Launch(inputs, logits, logits_row, rows, stream, stats);
}

// Inputs validated by the caller; logits_row empty: the [batch, max_k + 1,
// vocab] layout of Run's upload.
absl::StatusOr<std::vector<VerifyResult>> DeviceVerifier::Launch(absl::Span<const VerifyInput> inputs,
                                                                 const float* logits,
                                                                 absl::Span<const int64_t> logits_row,
                                                                 int64_t rows, cudaStream_t stream,
                                                                 DeviceVerifyStats* stats) {
  const int32_t B = static_cast<int32_t>(inputs.size());
  if (B == 0) return std::vector<VerifyResult>();
  if (inputs.size() > 65535) return absl::InvalidArgumentError("verify: at most 65535 sequences per batch");
  const int32_t V = inputs[0].vocab;
  int32_t K = 0;
  size_t n_q = 0;
  for (int32_t b = 0; b < B; ++b) {
    const VerifyInput& in = inputs[b];
    if (in.vocab != V) return absl::InvalidArgumentError("verify: every sequence of a batch needs the same vocab");
    K = std::max(K, in.k);
    for (int32_t i = 0; i < in.k; ++i) n_q += in.draft_dists[i].ids.size();
  }
  if (n_q > 0x7fffffff) return absl::InvalidArgumentError("verify: draft distributions too large");

  // Metadata in one upload: sections aligned to 16 bytes. The outputs
  // (accepted, next token, flags) are one contiguous section: one copy back.
  size_t off = 0;
  auto section = [&off](size_t bytes) {
    const size_t at = off;
    off += (bytes + 15) / 16 * 16;
    return at;
  };
  const size_t o_k = section(B * sizeof(int32_t));
  const size_t o_draft = section(static_cast<size_t>(B) * K * sizeof(int32_t));
  const size_t o_qoff = section((static_cast<size_t>(B) * K + 1) * sizeof(int32_t));
  const size_t o_qids = section(n_q * sizeof(int32_t));
  const size_t o_qprobs = section(n_q * sizeof(float));
  const size_t o_params = section(B * sizeof(SamplingParams));
  const size_t o_first = section(B * sizeof(uint64_t));
  const size_t o_rows = section(B * sizeof(int64_t));
  const size_t out_bytes = 2 * B * sizeof(int32_t) + static_cast<size_t>(B) * K;  // [2B] int32, [B, K] uint8
  const size_t o_out = section(out_bytes);
  host_meta_.assign(off, 0);
  char* h = host_meta_.data();
  auto at = [h](size_t o) { return h + o; };
  int32_t* k = reinterpret_cast<int32_t*>(at(o_k));
  int32_t* draft = reinterpret_cast<int32_t*>(at(o_draft));
  int32_t* qoff = reinterpret_cast<int32_t*>(at(o_qoff));
  int32_t* qids = reinterpret_cast<int32_t*>(at(o_qids));
  float* qprobs = reinterpret_cast<float*>(at(o_qprobs));
  SamplingParams* params = reinterpret_cast<SamplingParams*>(at(o_params));
  uint64_t* firstpos = reinterpret_cast<uint64_t*>(at(o_first));
  int64_t* row_at = reinterpret_cast<int64_t*>(at(o_rows));
  int32_t e = 0;
  for (int32_t b = 0; b < B; ++b) {
    const VerifyInput& in = inputs[b];
    k[b] = in.k;
    params[b] = in.params;
    firstpos[b] = in.first_position;
    row_at[b] = logits_row.empty() ? static_cast<int64_t>(b) * (K + 1) : logits_row[b];
    for (int32_t i = 0; i < K; ++i) {
      qoff[b * K + i] = e;
      if (i >= in.k) continue;
      draft[b * K + i] = in.draft_tokens[i];
      const SparseDist& q = in.draft_dists[i];
      for (size_t j = 0; j < q.ids.size(); ++j, ++e) {
        qids[e] = q.ids[j];
        qprobs[e] = q.probs[j];
      }
    }
  }
  qoff[B * K] = e;

  RETURN_IF_ERROR(meta_.Reserve(off));
  RETURN_IF_ERROR(workspace_.Reserve(VerifyWorkspaceBytes(B, K, V)));
  if (start_ == nullptr) SPECSERVE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start_));
  if (stop_ == nullptr) SPECSERVE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop_));
  SPECSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(meta_.get(), h, off, cudaMemcpyHostToDevice, stream));
  char* d = meta_.as<char>();
  VerifyBatchArgs args;
  args.logits = logits;
  args.logits_row = reinterpret_cast<const int64_t*>(d + o_rows);
  args.logits_rows = rows;
  args.batch = B;
  args.max_k = K;
  args.vocab = V;
  args.k = reinterpret_cast<const int32_t*>(d + o_k);
  args.draft_tokens = reinterpret_cast<const int32_t*>(d + o_draft);
  args.q_offsets = reinterpret_cast<const int32_t*>(d + o_qoff);
  args.q_count = e;
  args.q_ids = reinterpret_cast<const int32_t*>(d + o_qids);
  args.q_probs = reinterpret_cast<const float*>(d + o_qprobs);
  args.params = reinterpret_cast<const SamplingParams*>(d + o_params);
  args.first_position = reinterpret_cast<const uint64_t*>(d + o_first);
  args.accepted = reinterpret_cast<int32_t*>(d + o_out);
  args.next_token = args.accepted + B;
  args.accept_flags = reinterpret_cast<uint8_t*>(args.next_token + B);
  args.workspace = workspace_.get();
  args.workspace_bytes = workspace_.bytes();
  std::vector<char> out;
  double seconds = 0;
  RETURN_IF_ERROR(TimedLaunchThenCopyBack(
      start_, stop_, stream, [&] { return LaunchVerifyResample(args, stream); }, d + o_out, out_bytes, &out, &seconds));
  if (stats != nullptr) {
    stats->kernel_seconds = seconds;
    stats->bytes_to_host = static_cast<int64_t>(out_bytes);
  }
  const int32_t* acc = reinterpret_cast<const int32_t*>(out.data());
  const uint8_t* flags = reinterpret_cast<const uint8_t*>(acc + 2 * B);
  std::vector<VerifyResult> results(B);
  for (int32_t b = 0; b < B; ++b) {
    VerifyResult& r = results[b];
    r.accepted = acc[b];
    r.next_token = acc[B + b];
    for (int32_t i = 0; i < K && i < 64; ++i) {
      if (flags[static_cast<size_t>(b) * K + i] != 0) r.accept_mask |= uint64_t{1} << i;
    }
  }
  return results;
}

}  // namespace specserve::cuda
