// Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel
// random numbers: as easy as 1, 2, 3", SC 2011; the Random123 library).
//
// Why counter-based: every random number the decoder uses is a pure function
// of (request seed, absolute token position, purpose). Nothing is carried
// from call to call, so a CUDA thread, a CPU reference, a retried RPC and a
// different process all draw the same number for the same (seed, position,
// purpose), and no generator state has to be rolled back with the KV cache.
//
// Why it keeps a seeded request reproducible whatever the speculation length K
// is: the draw that decides "the token at position j" is keyed by j itself,
// never by a round number or an index inside a round. Splitting the sequence
// into rounds differently (K = 1, 4, adaptive, a fallback to K = 0) does not
// shift which number a position sees. Concretely:
//   - Greedy (temperature 0) output uses no random numbers and equals plain
//     greedy decoding token for token for every K schedule.
//   - A K = 0 round (Verify with k = 0) and plain decoding (SampleToken) use
//     the same draw (position, kTargetSample), so they emit the same token.
//   - With sampling and K > 0 the emitted sequence is a deterministic function
//     of (seed, prompt, drafter, K schedule): rerunning reproduces it exactly,
//     and its distribution is the target's for every K, but a different K
//     schedule can emit a different (equally distributed) sequence, because a
//     position is then decided by an accept test instead of a plain draw.
// Independence: each position's draws for different purposes use different
// counters, so the accept test never reuses the number that drew the draft
// token or the residual (reusing them would bias the output; see
// tests/verify_stats_test.cc, which checks that such a verifier is caught).
// A draw consumed for a draft token that is later discarded (after an earlier
// rejection) did not influence any emitted token, so redrawing that position
// with the same number in a later round keeps the output exact.
//
// Seed 0 is an ordinary seed: a caller that wants a fresh random stream for an
// unseeded request must pick a random seed itself.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SPECSERVE_HD __host__ __device__
#else
#define SPECSERVE_HD
#endif

namespace specserve {

// What a draw is for. The value is part of the Philox counter, so changing a
// value changes every seeded output: these numbers are part of the wire
// contract between the draft service, the target service and the tests.
enum class RngPurpose : uint32_t {
  kDraftSample = 1,   // the draft samples d_j from q_j
  kAccept = 2,        // the accept test for the drafted token at position j
  kResample = 3,      // the residual draw after a rejection at position j
  kTargetSample = 4,  // plain decoding, and the bonus token after K accepts
};

// One Philox4x32-10 block: 10 rounds over a 128-bit counter with a 64-bit key.
// Multipliers and Weyl constants are those of Random123 philox.h.
SPECSERVE_HD inline void Philox4x32_10(const uint32_t counter[4], const uint32_t key[2],
                                       uint32_t out[4]) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // key schedule (golden ratio, sqrt 3)
  uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {  // the key is bumped between rounds, not before the first
      k0 += kW0;
      k1 += kW1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c0;  // mulhilo
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

// 32 random bits for (seed, position, purpose). Key = seed (low word first);
// counter = {position low, position high, purpose, 0}; the first output word.
SPECSERVE_HD inline uint32_t RandomBits(uint64_t seed, uint64_t position, uint32_t purpose) {
  const uint32_t key[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  const uint32_t counter[4] = {static_cast<uint32_t>(position),
                               static_cast<uint32_t>(position >> 32), purpose, 0u};
  uint32_t out[4];
  Philox4x32_10(counter, key, out);
  return out[0];
}

// A float in [0, 1) on the grid k * 2^-24, k = 0 .. 2^24 - 1: the top 24 bits
// of RandomBits times 2^-24. Both steps are exact in float, so the CPU and a
// GPU produce the same bits.
SPECSERVE_HD inline float UniformFloat(uint64_t seed, uint64_t position, uint32_t purpose) {
  return static_cast<float>(RandomBits(seed, position, purpose) >> 8) * (1.0f / 16777216.0f);
}

SPECSERVE_HD inline float UniformFloat(uint64_t seed, uint64_t position, RngPurpose purpose) {
  return UniformFloat(seed, position, static_cast<uint32_t>(purpose));
}

}  // namespace specserve
