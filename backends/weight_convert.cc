#include "backends/weight_convert.h"

#include <vector>

#include "common/fp16.h"
#include "common/tensor_types.h"

namespace specserve {

void RowsToF16(const MatrixView& m, int64_t r0, int64_t n, uint16_t* out, ThreadPool& pool) {
  pool.ParallelFor(n, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> row(m.cols);
    for (int64_t r = begin; r < end; ++r) {
      DequantizeRow(m.type, m.row(r0 + r), row.data(), m.cols);
      uint16_t* dst = out + r * m.cols;
      for (int64_t c = 0; c < m.cols; ++c) dst[c] = F32ToF16(row[c]);
    }
  });
}

}  // namespace specserve
