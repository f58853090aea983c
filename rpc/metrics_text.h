// Reading Prometheus's text exposition format (what /metrics serves): the
// sum of a metric's samples whose labels match. Used where this project
// reads its own servers' metrics back: serve-bench's per-row view of the
// coordinator (--coordinator-metrics) and the end-to-end tests.
#pragma once

#include <string>
#include <vector>

namespace specserve::rpc {

// Sum of the samples of `name` (exactly that name: `x` does not match
// `x_total`) whose label set contains every `labels` part, written as in the
// exposition (e.g. {"status=\"ok\""}); -1 when no sample matches.
double SumSamples(const std::string& text, const std::string& name, const std::vector<std::string>& labels = {});

}  // namespace specserve::rpc
