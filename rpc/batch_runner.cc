#include "rpc/batch_runner.h"

#include <algorithm>
#include <chrono>

namespace specserve::rpc {

void RunBatch(Backend& backend, const std::vector<ForwardSeq>& passes, ServiceMetrics& metrics, BatchOutput* out) {
  const int64_t vocab = backend.config().vocab;
  const size_t n = passes.size();
  out->status.assign(n, absl::OkStatus());
  out->first_row.resize(n);
  int64_t rows = 0;
  for (size_t i = 0; i < n; ++i) {
    out->first_row[i] = rows;
    rows += passes[i].n_logits;
  }
  if (n == 0) return;
  const auto t0 = std::chrono::steady_clock::now();
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
  out->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  metrics.batch_size.Observe(static_cast<double>(n));
  metrics.forward_seconds.Observe(out->seconds);
}

}  // namespace specserve::rpc
