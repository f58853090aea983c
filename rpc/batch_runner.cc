#include "rpc/batch_runner.h"

#include <algorithm>
#include <chrono>

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

// Backend::ForwardVerify over the batch; alone per pass if it is refused.
void RunForwardVerify(Backend& backend, const std::vector<ForwardSeq>& passes,
                      const std::vector<const VerifyInput*>& verify, ServiceMetrics& metrics, BatchOutput* out) {
  const int64_t vocab = backend.config().vocab;
  const size_t n = passes.size();
  VerifyBatchOutput v;
  absl::Status s = backend.ForwardVerify(passes, verify, &v);
  double verify_seconds = v.verify_seconds;
  int64_t bytes = v.bytes_to_host;
  if (s.ok()) {
    out->logits = std::move(v.logits);
    out->first_row = std::move(v.first_row);
    out->results = std::move(v.results);
  } else if (n == 1) {
    out->status[0] = s;
  } else {
    int64_t rows = 0;
    for (size_t i = 0; i < n; ++i) {
      out->first_row[i] = rows;
      rows += verify[i] == nullptr ? passes[i].n_logits : 0;
    }
    out->logits.assign(rows * vocab, 0.0f);
    verify_seconds = 0;
    bytes = 0;
    for (size_t i = 0; i < n; ++i) {
      out->status[i] = backend.ForwardVerify({passes[i]}, {verify[i]}, &v);
      if (!out->status[i].ok()) continue;
      verify_seconds += v.verify_seconds;
      bytes += v.bytes_to_host;
      if (verify[i] != nullptr) {
        out->results[i] = v.results[0];
      } else {
        std::copy(v.logits.begin(), v.logits.begin() + passes[i].n_logits * vocab,
                  out->logits.begin() + out->first_row[i] * vocab);
      }
    }
  }
  metrics.VerifiedOn(backend.verify_location());
  metrics.verify_seconds.Observe(verify_seconds);
  metrics.verify_bytes_to_host.Increment(static_cast<double>(bytes));
}

// Backend::ForwardSample over the batch; alone per pass if it is refused.
void RunForwardSample(Backend& backend, const std::vector<ForwardSeq>& passes,
                      const std::vector<const DraftSampleInput*>& sample, BatchOutput* out) {
  const int64_t vocab = backend.config().vocab;
  const size_t n = passes.size();
  SampleBatchOutput v;
  absl::Status s = backend.ForwardSample(passes, sample, &v);
  if (s.ok()) {
    out->logits = std::move(v.logits);
    out->first_row = std::move(v.first_row);
    out->samples = std::move(v.samples);
    return;
  }
  if (n == 1) {
    out->status[0] = s;
    return;
  }
  int64_t rows = 0;
  for (size_t i = 0; i < n; ++i) {
    out->first_row[i] = rows;
    rows += sample[i] == nullptr ? passes[i].n_logits : 0;
  }
  out->logits.assign(rows * vocab, 0.0f);
  for (size_t i = 0; i < n; ++i) {
    out->status[i] = backend.ForwardSample({passes[i]}, {sample[i]}, &v);
    if (!out->status[i].ok()) continue;
    if (sample[i] != nullptr) {
      out->samples[i] = std::move(v.samples[0]);
    } else {
      std::copy(v.logits.begin(), v.logits.begin() + passes[i].n_logits * vocab,
                out->logits.begin() + out->first_row[i] * vocab);
    }
  }
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
