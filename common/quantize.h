// Row quantizers into ggml's block layouts (ggml-common.h), the inverse of
// DequantizeRow (common/tensor_types.h). They follow ggml's reference
// quantizers (ggml-quants.c `quantize_row_*_ref`: no importance matrix):
//   Q8_0  block of 32: f16 d, int8 qs[32]; d = max|x| / 127, q = round(x / d);
//   Q5_0  block of 32: f16 d, qh[4], qs[16]; d = -max / 16 (max: the value of
//         largest magnitude), q = x / d + 16 in [0, 31];
//   Q4_K  super-block of 256: eight sub-blocks of 32 with 6-bit scale and
//         min, fitted by weighted least squares (make_qkx2_quants);
//   Q6_K  super-block of 256: sixteen sub-blocks of 16 with int8 scales,
//         6-bit values (make_qx_quants);
//   F16 / BF16 round to nearest even; F32 is a copy.
#pragma once

#include <cstdint>

#include "common/tensor_types.h"

namespace specserve {

// Whether QuantizeRow can write type T.
bool CanQuantize(GgmlType t);

// dst[0 .. RowBytes(t, n)) = src[0 .. n) in type T; n is a multiple of the
// block size and CanQuantize(t) (a broken invariant: aborts otherwise).
void QuantizeRow(GgmlType t, const float* src, void* dst, int64_t n);

}  // namespace specserve
