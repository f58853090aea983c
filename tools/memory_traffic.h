// What decoding one token reads, and what this machine can read: the two
// numbers that say how far a decode speed is from the memory-bound floor
// (docs/performance_model.md).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/weights.h"

namespace specserve::cli {

// The matrices one decode step multiplies: every layer's seven and the
// output matrix (tools/dot_peak.h counts their multiply-adds).
std::vector<const MatrixView*> TokenMatrices(const ModelWeights& w);

// Runs body(t) for t in [0, threads) on as many threads at once, `reps`
// times; the shortest of those wall times, in seconds.
double FastestParallelRun(int threads, int reps, const std::function<void(int)>& body);

// Bytes of weights one decode step reads: every matrix of every layer, the
// output matrix and one embedding row (norm vectors are negligible).
int64_t WeightBytesPerToken(const ModelWeights& w);

// Sustained read bandwidth in GB/s with `threads` threads streaming a buffer
// far larger than the last-level cache (best of a few passes).
double MeasureReadBandwidthGBs(int threads);

}  // namespace specserve::cli
