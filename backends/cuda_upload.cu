// The weight uploads of backends/cuda_upload.cuh.
#include "backends/cuda_upload.cuh"

#include <algorithm>
#include <vector>

#include "backends/weight_convert.h"
#include "common/status_macros.h"
#include "common/tensor_types.h"

namespace specserve {

absl::Status UploadVector(const float* host, int64_t n, cuda::DeviceBuffer* out) {
  RETURN_IF_ERROR(out->Allocate(n * sizeof(float)));
  SPECSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpy(out->get(), host, n * sizeof(float), cudaMemcpyHostToDevice));
  return absl::OkStatus();
}

absl::Status UploadMatrix(const MatrixView& m, ThreadPool& pool, DeviceMatrix* out) {
  out->rows = m.rows;
  out->cols = m.cols;
  const size_t bytes = static_cast<size_t>(m.rows) * m.cols * sizeof(uint16_t);
  RETURN_IF_ERROR(out->data.Allocate(bytes));
  if (m.type == GgmlType::kF16 && m.row_bytes == m.cols * sizeof(uint16_t)) {
    SPECSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpy(out->data.get(), m.data, bytes, cudaMemcpyHostToDevice));
    return absl::OkStatus();
  }
  const int64_t slab = std::max<int64_t>(1, (int64_t{64} << 20) / std::max<int64_t>(1, m.cols));
  std::vector<uint16_t> half(static_cast<size_t>(std::min(slab, m.rows)) * m.cols);
  for (int64_t r0 = 0; r0 < m.rows; r0 += slab) {
    const int64_t n = std::min(slab, m.rows - r0);
    RowsToF16(m, r0, n, half.data(), pool);
    SPECSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpy(out->data.as<uint16_t>() + r0 * m.cols, half.data(),
                                              n * m.cols * sizeof(uint16_t), cudaMemcpyHostToDevice));
  }
  return absl::OkStatus();
}

}  // namespace specserve
