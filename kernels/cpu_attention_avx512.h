// The pieces kernels/cpu_attention.cc and kernels/cpu_attention_avx512.cc
// share: the AVX-512 build of the kernel (kernels/cpu_attention_body.h) and
// the softmax both builds call.
#pragma once

#include <cstdint>

#include "kernels/cpu_attention.h"

namespace specserve::cpu {

// PagedAttention with 16-float vectors; only call where UseAvx512MatMul().
void PagedAttentionAvx512(const PagedAttentionArgs& a, int64_t begin, int64_t end, float* scratch);

// PagedAttention with 8-float AVX2 vectors, whatever the CPU has (tests
// check both builds give the same bits).
void PagedAttentionAvx2(const PagedAttentionArgs& a, int64_t begin, int64_t end, float* scratch);

// In place: s[i] = exp(s[i] - max(s)) / sum, for the n entries of s.
void SoftmaxInPlace(float* s, int32_t n);

}  // namespace specserve::cpu
