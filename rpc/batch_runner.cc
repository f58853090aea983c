#include "rpc/batch_runner.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/types/span.h"

namespace specserve::rpc {
namespace {

// Every pass's logits through Backend::Forward.
void RunForward(Backend& backend, const std::vector<ForwardSeq>& passes, BatchOutput* out) {
  const int64_t vocab = backend.config().vocab;
  const size_t n = passes.size();
  int64_t rows = 0;
  for (size_t i = 0; i < n; ++i) {
    out->first_row[i] = rows;
    rows += passes[i].n_logits;
  }
  absl::Status s = backend.Forward(passes, &out->logits);
  if (!s.ok() && n > 1) {
    out->logits.assign(rows * vocab, 0.0f);
    std::vector<float> one;
    for (size_t i = 0; i < n; ++i) {
      out->status[i] = backend.Forward({passes[i]}, &one);
      if (out->status[i].ok()) {
        std::copy(one.begin(), one.begin() + passes[i].n_logits * vocab,
                  out->logits.begin() + out->first_row[i] * vocab);
      }
    }
  } else if (!s.ok()) {
    out->status[0] = s;
  }
}

// The two steps that run where the backend keeps its logits, for
// RunForwardStep: the target's verify (Backend::ForwardVerify) and the
// draft's sampling (Backend::ForwardSample). Input is the per-pass block or
// rule, Output what one backend call gives back, Result what a pass with an
// input gets (Output::results / ::samples -> BatchOutput::results / ::samples).
struct VerifyStep {
  using Input = VerifyInput;
  using Output = VerifyBatchOutput;
  static absl::Status Run(Backend& backend, absl::Span<const ForwardSeq> passes, absl::Span<const Input* const> in,
                          Output* v) {
    return backend.ForwardVerify(passes, in, v);
  }
  static std::vector<VerifyResult>& Results(Output& v) { return v.results; }
  static std::vector<VerifyResult>& Results(BatchOutput& out) { return out.results; }
};

struct SampleStep {
  using Input = DraftSampleInput;
  using Output = SampleBatchOutput;
  static absl::Status Run(Backend& backend, absl::Span<const ForwardSeq> passes, absl::Span<const Input* const> in,
                          Output* v) {
    return backend.ForwardSample(passes, in, v);
  }
  static std::vector<DraftSample>& Results(Output& v) { return v.samples; }
  static std::vector<DraftSample>& Results(BatchOutput& out) { return out.samples; }
};

// Step::Run over the batch; alone per pass if it is refused (n > 1), each
// pass with its own status. A pass with an input gets its Result, one
// without its logits rows. tally(v) sees the Output of every call that
// counts: the batch call (whatever its status) unless it was retried pass by
// pass, else each pass's call that succeeded.
template <typename Step, typename Tally>
void RunForwardStep(Backend& backend, const std::vector<ForwardSeq>& passes,
                    const std::vector<const typename Step::Input*>& in, Tally&& tally, BatchOutput* out) {
  const int64_t vocab = backend.config().vocab;
  const size_t n = passes.size();
  typename Step::Output v;
  absl::Status s = Step::Run(backend, passes, in, &v);
  if (s.ok()) {
    tally(v);
    out->logits = std::move(v.logits);
    out->first_row = std::move(v.first_row);
    Step::Results(*out) = std::move(Step::Results(v));
    return;
  }
  if (n == 1) {
    tally(v);
    out->status[0] = s;
    return;
  }
  int64_t rows = 0;
  for (size_t i = 0; i < n; ++i) {
    out->first_row[i] = rows;
    rows += in[i] == nullptr ? passes[i].n_logits : 0;
  }
  out->logits.assign(rows * vocab, 0.0f);
  for (size_t i = 0; i < n; ++i) {
    out->status[i] = Step::Run(backend, {passes[i]}, {in[i]}, &v);
    if (!out->status[i].ok()) continue;
    tally(v);
    if (in[i] != nullptr) {
      Step::Results(*out)[i] = std::move(Step::Results(v)[0]);
    } else {
      std::copy(v.logits.begin(), v.logits.begin() + passes[i].n_logits * vocab,
                out->logits.begin() + out->first_row[i] * vocab);
    }
  }
}

// Backend::ForwardVerify, with the verify metrics of the calls that count.
void RunForwardVerify(Backend& backend, const std::vector<ForwardSeq>& passes,
                      const std::vector<const VerifyInput*>& verify, ServiceMetrics& metrics, BatchOutput* out) {
  double verify_seconds = 0;
  int64_t bytes = 0;
  RunForwardStep<VerifyStep>(
      backend, passes, verify,
      [&](const VerifyBatchOutput& v) {
        verify_seconds += v.verify_seconds;
        bytes += v.bytes_to_host;
      },
      out);
  metrics.VerifiedOn(backend.verify_location());
  metrics.verify_seconds.Observe(verify_seconds);
  metrics.verify_bytes_to_host.Increment(static_cast<double>(bytes));
}

// Backend::ForwardSample (no metrics of its own here).
void RunForwardSample(Backend& backend, const std::vector<ForwardSeq>& passes,
                      const std::vector<const DraftSampleInput*>& sample, BatchOutput* out) {
  RunForwardStep<SampleStep>(backend, passes, sample, [](const SampleBatchOutput&) {}, out);
}

}  // namespace

void RunBatch(Backend& backend, const std::vector<ForwardSeq>& passes, const std::vector<const VerifyInput*>& verify,
              const std::vector<const DraftSampleInput*>& sample, ServiceMetrics& metrics, BatchOutput* out) {
  const size_t n = passes.size();
  out->status.assign(n, absl::OkStatus());
  out->first_row.assign(n, 0);
  out->results.assign(n, VerifyResult{});
  out->samples.assign(n, DraftSample{});
  if (n == 0) return;
  const auto t0 = std::chrono::steady_clock::now();
  const bool any_block = std::any_of(verify.begin(), verify.end(), [](const VerifyInput* v) { return v != nullptr; });
  const bool any_rule =
      std::any_of(sample.begin(), sample.end(), [](const DraftSampleInput* r) { return r != nullptr; });
  if (any_block && verify.size() == n) {
    RunForwardVerify(backend, passes, verify, metrics, out);
  } else if (any_rule && sample.size() == n) {
    RunForwardSample(backend, passes, sample, out);
  } else {
    RunForward(backend, passes, out);
  }
  out->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  metrics.batch_size.Observe(static_cast<double>(n));
  metrics.forward_seconds.Observe(out->seconds);
}

}  // namespace specserve::rpc
