// Y = X W^T with int8 activations (MatMulActivations::kInt8,
// common/matmul_activations.h): each token's activations are quantized to
// int8 in blocks of 32 and multiplied into the weights' integer codes with
// integer dot products (AVX-512 VNNI vpdpbusd), for Q8_0, Q5_0, Q4_K and Q6_K
// weights read in place. MatMul (kernels/cpu_matmul.h) quantizes x once per
// call (QuantizeActivationsInt8) and splits the rows over its pool
// (MatMulInt8Rows); other weight types keep the fp32 path.
//
// Numerics (the contract; tests/matmul_int8_test.cc checks it bit for bit
// against a plain scalar model):
//
// Activations, per token, per block b of 32 values x[0..32):
//   amax = max |x|,  d = amax / 127 (fp32 division),
//   d = 0 when d < FLT_MIN (all-zero or denormal blocks),
//   id = d ? 1 / d : 0,  q = nearbyint(x * id) (round half to even), |q| <= 127.
//   A block holding a NaN or an infinity gets q = 0 and d = NaN, so every
//   output it touches is NaN (the fp32 path would give NaN or inf).
//   S4[l] = sum of q over the 4 values of lane l (values 4l..4l+3 of a pair of
//   blocks), S = sum of q over the block.
//
// Weights, per value: an unsigned integer code u, an integer offset o of the
// type, a float scale ws shared by (at least) 16 consecutive values, and for
// Q4_K a float min m1 per 32 values:
//   Q8_0  u = qs + 128 (0..255), o = 128, ws = d (f16 -> fp32)
//   Q5_0  u = the 5-bit value (0..31), o = 16, ws = d
//   Q4_K  u = the nibble (0..15), o = 0, ws = d * sc (fp32 product, as ggml's
//         d1), m1 = dmin * m (as ggml's m1)
//   Q6_K  u = the 6-bit value (0..63), o = 32, ws = d * scales[i / 16]
// so the weight is (u - o) * ws (- m1): exactly ggml's dequantized value, up to
// the rounding of ggml's float expression.
//
// Q8_0 and Q4_K, per (row, token), from acc = +0, for each block b of 32
// values in order:
//   i = sum over the block of u * q  -  o * S_b     (exact int32)
//   acc = fma(float(i), ws_b * d_b, acc)            (ws * d: fp32 product)
//   Q4_K only, then: acc = fma(-m1_b, ms_b, acc), ms_b = d_b * float(S_b)
//   (fp32 product).
//   y = acc.
//
// Q6_K, per (row, token), from acc = +0, for each block b of 32 values in
// order, with its two 16-value sub-blocks j0 = 2b, j1 = 2b + 1 (within the
// super-block), their integer scales s0, s1 (scales[j], int8) and the
// super-block's d (f16 -> fp32):
//   i = s0 * (sum over j0 of u * q - 32 * S16_j0)
//     + s1 * (sum over j1 of u * q - 32 * S16_j1)    (exact int32)
//   acc = fma(float(i), d * d_b, acc)                (d * d_b: fp32 product)
//   y = acc. (S16_j: the sum of q over sub-block j.)
//
// The VNNI kernel reads Q8_0, Q4_K and Q6_K matrices repacked 16 rows at a
// time (kernels/cpu_matmul_packed.h), a row per lane: the float work is once
// per block; a matrix nobody packed runs the portable kernel.
//
// Q5_0: a row is read 64 values (a "pair" of 32-value blocks) at a
// time into 16 fp32 lanes; lane l of pair p covers values 64p + 4l .. 64p +
// 4l + 3, lanes 0..7 the first block, 8..15 the second. Per (row, token),
// starting from acc[16] = +0, for each pair p, for each lane l:
//   i = sum over the lane's 4 values of u * q  -  o * S4[l]  (exact int32)
//   acc[l] = fma(float(i), ws[l] * d[l], acc[l])   (ws * d: fp32 product)
//   An odd last block (rows of 32 * odd values) is a pair whose
//   second block has u = 0, q = 0, ws = 0, d = 0 (its lanes get fma(0, 0, acc)).
//   y = the 16 lanes summed as _mm512_reduce_add_ps does: a[i] = acc[i] +
//   acc[i + 8], b[i] = a[i] + a[i + 4], y = (b[0] + b[2]) + (b[1] + b[3]).
// Nothing in that order depends on the number of tokens in the pass, the rows
// computed together or the thread, so a verify pass of K+1 tokens gives each
// token the bits one-token decoding gives it (batch invariance).
//
// Kernels: with AVX-512 F/BW/DQ/VL and VNNI (checked at run time;
// SPECSERVE_CPU_KERNELS=avx2 turns AVX-512 off) tiles of up to 8 rows x 8
// tokens keep every accumulator in a zmm register and read each weight pair
// once per group of tokens (kernels/cpu_matmul_int8.cc, Q5_0; Q8_0, Q4_K and
// Q6_K: 64 rows x up to 3 tokens, kernels/cpu_matmul_packed.cc). With AVX2
// but no VNNI the packed Q8_0, Q4_K and Q6_K matrices run
// kernels/cpu_matmul_packed_avx2.cc (the same integers through exact int16
// pair sums, the same float operations). Elsewhere (Q5_0 without VNNI, views
// nobody packed) a portable scalar kernel computes the same integers and the
// same float operations (std::fma), so it gives the same bits, slowly
// (kernels/cpu_matmul_int8_portable.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "common/tensor_types.h"
#include "common/weights.h"

namespace specserve::cpu {

// One token's pair of 32-value blocks, as the kernels read it: the int8
// values, the per-lane integer bias -o * S4 (o: the weight type's offset) and
// the per-lane scale d (d of the lane's block, 8 lanes per block).
struct alignas(64) Int8Pair {
  int8_t q[64];
  int32_t bias[16];
  float d[16];
};

// 16 floats, 64-byte aligned: a Q4_K super-block's ms, lane 8 + j holding
// ms of its block j (lanes 0..7 zero).
struct alignas(64) Float16x {
  float v[16];
};

// x quantized for one weight type: T tokens of n values (n a multiple of 32).
struct Int8Activations {
  GgmlType type = GgmlType::kQ8_0;
  int64_t T = 0, n = 0;
  int64_t pairs = 0;   // ceil(n / 64) per token
  int64_t supers = 0;  // n / 256 per token (Q4_K only, else 0)
  int64_t blocks = 0;  // n / 32 per token (Q8_0 only, else 0)
  int64_t subs = 0;    // n / 16 per token (Q6_K only, else 0)
  std::vector<Int8Pair> pair;        // [T][pairs]
  std::vector<Float16x> ms;          // [T][supers]: Q4_K's ms lanes (see above)
  std::vector<int32_t> block_bias;   // [T][blocks]: Q8_0's -128 * S per block
  std::vector<int32_t> sub_bias;     // [T][subs]: Q6_K's -32 * S16 per 16 values
  const Int8Pair* token(int64_t t) const { return pair.data() + t * pairs; }
  const Float16x* token_ms(int64_t t) const { return ms.data() + t * supers; }
};

// True when the int8 kernels take this matrix: Q8_0, Q5_0, Q4_K or Q6_K with
// w.cols a multiple of 32.
bool Int8MatMulSupports(const MatrixView& w);

// True when MatMulInt8Rows runs the AVX-512 VNNI kernel on this CPU.
bool UseVnniInt8MatMul();

// x: [T, n] quantized for weights of type `type` (the bias holds that type's
// offset). Reuses out's storage.
void QuantizeActivationsInt8(GgmlType type, const float* x, int64_t T, int64_t n, Int8Activations& out);

// y[t, r] for r in [r0, r1), t in [0, a.T), y: [a.T, w.rows]. Requires
// Int8MatMulSupports(w), a.type == w.type and a.n == w.cols.
void MatMulInt8Rows(const MatrixView& w, const Int8Activations& a, float* y, int64_t r0, int64_t r1);

// The same with the portable kernels (the VNNI ones are not used even where
// the CPU has them): for tests, which check both give the same bits.
void QuantizeActivationsInt8Portable(GgmlType type, const float* x, int64_t T, int64_t n, Int8Activations& out);
void MatMulInt8RowsPortable(const MatrixView& w, const Int8Activations& a, float* y, int64_t r0, int64_t r1);

}  // namespace specserve::cpu
