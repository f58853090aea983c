// The arithmetic side of a pass's floor, beside memory_traffic.h's reading
// side: how many int8 multiply-adds this machine does a second with the
// instruction the packed int8 kernels' inner loop is made of, and how many
// one token needs. A pass of T tokens takes at least T x MACs / peak of
// arithmetic whatever overlaps it (docs/performance_model.md).
#pragma once

#include <cstdint>
#include <string>

#include "common/weights.h"

namespace specserve::cli {

// Multiply-adds of one token through the matrices: rows x cols of every
// layer's seven and of the output matrix.
int64_t MatrixMacsPerToken(const ModelWeights& w);

struct DotPeak {
  std::string instruction;  // what was timed; empty when no int8 kernel runs here
  double gmacs_per_s = 0;   // int8 multiply-adds a second, all threads together
};

// Independent chains of the kernels' dot, on `threads` threads at once, best
// of a few ~20 ms runs: AVX-512 VNNI's vpdpbusd (64 multiply-adds) where
// the packed kernels use it (UseVnniInt8MatMul), else AVX2's vpmaddubsw +
// vpmaddwd + vpaddd (32). The kernels' per-block float work comes on top, so
// this is an upper bound on their rate.
DotPeak MeasureInt8DotPeak(int threads);

}  // namespace specserve::cli
