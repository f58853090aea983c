// The host side of uploading a weight matrix to a device as f16: rows of
// any GGML type dequantised and rounded to f16, on many threads. In a .cc
// file so it is compiled with the project's CPU flags (F16C conversions),
// which nvcc's host pass does not get.
#pragma once

#include <cstdint>

#include "common/thread_pool.h"
#include "common/weights.h"

namespace specserve {

// out[r * m.cols + c] = f16(row r0 + r of m, column c) for r in [0, n):
// [n, m.cols] f16 bits, row-major. Rows are split over `pool`.
void RowsToF16(const MatrixView& m, int64_t r0, int64_t n, uint16_t* out, ThreadPool& pool);

}  // namespace specserve
