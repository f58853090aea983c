// The CPU backend's weights under int8 activations: the model's views, with
// every Q8_0, Q4_K and Q6_K matrix also repacked for the int8 kernel
// (kernels/cpu_matmul_packed.h; MatrixView::packed points there) where the
// packed kernel runs on this CPU (cpu::PackedKernelRuns: VNNI, or AVX2).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/weights.h"

namespace specserve {

struct PackedWeights {
  ModelWeights views;  // the model's views (its vectors stay the model's), packed set
  std::vector<std::unique_ptr<uint8_t[]>> buffers;
};

// Packs every Q8_0, Q4_K and Q6_K matrix of w (the layers' and the output's; the token
// embeddings are read a row at a time, in place) on up to `threads` threads.
std::unique_ptr<PackedWeights> PackWeightsForInt8(const ModelWeights& w, int threads);

}  // namespace specserve
