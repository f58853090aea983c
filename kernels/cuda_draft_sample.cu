#include "kernels/cuda_draft_sample.cuh"

#include <cuda_runtime.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cuda_sampling_device.cuh"
#include "spec/rng.h"

namespace specserve::cuda {
namespace {

static_assert(kMaxDraftSampleTopN <= kChunk, "the top-N keys are sorted in one chunk of shared memory");

// sampling.cc DraftDistribution then SampleSparse, for sequence blockIdx.x.
__global__ void __launch_bounds__(kThreads) DraftSampleKernel(DraftSampleBatchArgs a) {
  __shared__ Shared sh;
  const int b = blockIdx.x;
  const int V = a.vocab;
  int64_t r = a.logits_row[b];
  r = r < 0 ? 0 : r >= a.logits_rows ? a.logits_rows - 1 : r;
  const float* logits = a.logits + r * V;
  const DraftSampleInput P = a.rules[b];
  int32_t* ids = a.ids + static_cast<int64_t>(b) * a.max_n;
  float* probs = a.probs + static_cast<int64_t>(b) * a.max_n;

  const int best = BlockArgmax(logits, V, sh);
  const float max_logit = logits[best];
  const float t = P.temperature;
  if (!(t > 0.0f) || !isfinite(max_logit)) {  // greedy, or no finite maximum: one-hot at the argmax
    if (threadIdx.x == 0) {
      ids[0] = best;
      probs[0] = 1.0f;
      a.count[b] = 1;
      a.token[b] = best;
    }
    return;
  }
  // The n best rank keys (unique: the id is in the low word), sorted descending.
  const int n = min(max(P.top_n, 1), min(V, a.max_n));
  const uint64_t kth = n == V ? 0 : SelectKth(logits, V, 0, ~0ull, static_cast<unsigned>(n), sh);
  // The band [kth, ~0): no rank key is ~0 (NaN ranks as -inf, so the high
  // word is at most +inf's 0xFF800000), so this is every key >= kth.
  SortBandKeys(logits, V, kth, ~0ull, n, sh);
  __syncthreads();

  // The rest is O(N) and runs on one thread, in the host's order.
  if (threadIdx.x != 0) return;
  float e[kMaxDraftSampleTopN];
  double total = 0.0;
  for (int i = 0; i < n; ++i) {
    e[i] = Weight(logits[KeyId(sh.u.keys[i])], max_logit, t);
    total = __dadd_rn(total, static_cast<double>(e[i]));
  }
  int keep = n;
  if (P.top_p < 1.0f) {
    const double target = __dmul_rn(static_cast<double>(P.top_p), total);
    double cum = 0.0;
    for (int i = 0; i < n; ++i) {
      cum = __dadd_rn(cum, static_cast<double>(e[i]));
      if (cum >= target) {
        keep = i + 1;
        break;
      }
    }
  }
  double kept = 0.0;
  for (int i = 0; i < keep; ++i) kept = __dadd_rn(kept, static_cast<double>(e[i]));
  int c = 0;
  for (int i = 0; i < keep; ++i) {
    const float p = __double2float_rn(__ddiv_rn(static_cast<double>(e[i]), kept));
    if (p > 0.0f) {
      ids[c] = KeyId(sh.u.keys[i]);
      probs[c] = p;
      ++c;
    }
  }
  a.count[b] = c;
  // SampleSparse = SampleFromProbs over the entries (all positive here).
  if (c == 0) {
    a.token[b] = -1;
    return;
  }
  double sum = 0.0;
  for (int i = 0; i < c; ++i) sum = __dadd_rn(sum, static_cast<double>(probs[i]));
  const float u = UniformFloat(P.seed, P.position, RngPurpose::kDraftSample);
  const double target = __dmul_rn(static_cast<double>(u), sum);
  double cum = 0.0;
  int found = c - 1;
  for (int i = 0; i < c - 1; ++i) {
    cum = __dadd_rn(cum, static_cast<double>(probs[i]));
    if (cum > target) {
      found = i;
      break;
    }
  }
  a.token[b] = ids[found];
}

}  // namespace

absl::Status LaunchDraftSample(const DraftSampleBatchArgs& a, cudaStream_t stream) {
  if (a.batch < 0) return absl::InvalidArgumentError("draft sample: bad batch");
  if (a.vocab < 1) return absl::InvalidArgumentError("draft sample: vocab must be >= 1");
  if (a.max_n < 1 || a.max_n > kMaxDraftSampleTopN) {
    return absl::InvalidArgumentError(absl::StrCat("draft sample: max_n must be in [1, ", kMaxDraftSampleTopN, "]"));
  }
  if (a.batch == 0) return absl::OkStatus();
  if (a.logits == nullptr || a.logits_row == nullptr || a.logits_rows < 1 || a.rules == nullptr ||
      a.token == nullptr || a.count == nullptr || a.ids == nullptr || a.probs == nullptr) {
    return absl::InvalidArgumentError("draft sample: null pointer or no logits rows");
  }
  DraftSampleKernel<<<a.batch, kThreads, 0, stream>>>(a);
  return CheckLaunch("DraftSampleKernel");
}

DeviceDraftSampler::~DeviceDraftSampler() {
  if (start_ != nullptr) cudaEventDestroy(start_);
  if (stop_ != nullptr) cudaEventDestroy(stop_);
}

absl::StatusOr<std::vector<DraftSample>> DeviceDraftSampler::Run(absl::Span<const DraftSampleInput> rules,
                                                                 const float* logits, int32_t vocab,
                                                                 cudaStream_t stream, DeviceSampleStats* stats) {
  if (rules.empty()) return std::vector<DraftSample>();
  if (logits == nullptr || vocab < 1) return absl::InvalidArgumentError("draft sample: no logits");
  const size_t bytes = rules.size() * static_cast<size_t>(vocab) * sizeof(float);
  RETURN_IF_ERROR(logits_.Reserve(bytes));
  SPECSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(logits_.get(), logits, bytes, cudaMemcpyHostToDevice, stream));
  std::vector<int64_t> rows(rules.size());
  for (size_t b = 0; b < rows.size(); ++b) rows[b] = static_cast<int64_t>(b);
  return RunOnDevice(rules, logits_.as<float>(), rows, static_cast<int64_t>(rules.size()), vocab, stream, stats);
}

absl::StatusOr<std::vector<DraftSample>> DeviceDraftSampler::RunOnDevice(absl::Span<const DraftSampleInput> rules,
                                                                         const float* logits,
                                                                         absl::Span<const int64_t> logits_row,
                                                                         int64_t rows, int32_t vocab,
                                                                         cudaStream_t stream,
                                                                         DeviceSampleStats* stats) {
  const int32_t B = static_cast<int32_t>(rules.size());
  if (B == 0) return std::vector<DraftSample>();
  if (logits_row.size() != rules.size()) return absl::InvalidArgumentError("draft sample: one logits row per sequence");
  if (logits == nullptr || vocab < 1) return absl::InvalidArgumentError("draft sample: no device logits");
  int32_t N = 1;
  for (int32_t b = 0; b < B; ++b) {
    if (absl::Status s = ValidateDraftSampleInput(rules[b]); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", b, ": ", s.message()));
    }
    if (logits_row[b] < 0 || logits_row[b] >= rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("draft sample: sequence ", b, "'s row ", logits_row[b], " leaves the ", rows, " logits rows"));
    }
    N = std::max(N, std::min(rules[b].top_n, vocab));
  }

  // Metadata in one upload, the outputs in one contiguous section (one copy
  // back): [B] tokens, [B] counts, [B, N] ids, [B, N] probs.
  size_t off = 0;
  auto section = [&off](size_t bytes) {
    const size_t at = off;
    off += (bytes + 15) / 16 * 16;
    return at;
  };
  const size_t o_rules = section(B * sizeof(DraftSampleInput));
  const size_t o_rows = section(B * sizeof(int64_t));
  const size_t out_bytes = (2 * static_cast<size_t>(B) + 2 * static_cast<size_t>(B) * N) * sizeof(int32_t);
  const size_t o_out = section(out_bytes);
  host_meta_.assign(off, 0);
  char* h = host_meta_.data();
  std::copy(rules.begin(), rules.end(), reinterpret_cast<DraftSampleInput*>(h + o_rules));
  std::copy(logits_row.begin(), logits_row.end(), reinterpret_cast<int64_t*>(h + o_rows));

  RETURN_IF_ERROR(meta_.Reserve(off));
  if (start_ == nullptr) SPECSERVE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start_));
  if (stop_ == nullptr) SPECSERVE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop_));
  // Only the inputs go up; the kernel writes every output it copies back.
  SPECSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(meta_.get(), h, o_out, cudaMemcpyHostToDevice, stream));
  char* d = meta_.as<char>();
  DraftSampleBatchArgs args;
  args.logits = logits;
  args.logits_rows = rows;
  args.logits_row = reinterpret_cast<const int64_t*>(d + o_rows);
  args.batch = B;
  args.vocab = vocab;
  args.max_n = N;
  args.rules = reinterpret_cast<const DraftSampleInput*>(d + o_rules);
  args.token = reinterpret_cast<int32_t*>(d + o_out);
  args.count = args.token + B;
  args.ids = args.count + B;
  args.probs = reinterpret_cast<float*>(args.ids + static_cast<size_t>(B) * N);
  std::vector<char> out;
  double seconds = 0;
  RETURN_IF_ERROR(TimedLaunchThenCopyBack(
      start_, stop_, stream, [&] { return LaunchDraftSample(args, stream); }, d + o_out, out_bytes, &out, &seconds));
  if (stats != nullptr) {
    stats->kernel_seconds = seconds;
    stats->bytes_to_host = static_cast<int64_t>(out_bytes);
  }
  const int32_t* token = reinterpret_cast<const int32_t*>(out.data());
  const int32_t* count = token + B;
  const int32_t* ids = count + B;
  const float* probs = reinterpret_cast<const float*>(ids + static_cast<size_t>(B) * N);
  std::vector<DraftSample> samples(B);
  for (int32_t b = 0; b < B; ++b) {
    const int32_t c = std::clamp(count[b], 0, N);
    samples[b].token = token[b];
    samples[b].dist.ids.assign(ids + static_cast<size_t>(b) * N, ids + static_cast<size_t>(b) * N + c);
    samples[b].dist.probs.assign(probs + static_cast<size_t>(b) * N, probs + static_cast<size_t>(b) * N + c);
  }
  return samples;
}

}  // namespace specserve::cuda
