// The AVX-512 VNNI kernels over the packed layouts of cpu_matmul_packed.h
// (written by cpu_matmul_pack.cc), and the choice of PackedWidePass.
#include "kernels/cpu_matmul_packed.h"

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "common/check.h"
#include "common/fp16.h"

namespace specserve::cpu {
namespace {
PackedWidePass DefaultPackedWidePass() {
  const char* env = std::getenv("SPECSERVE_CPU_WIDE_PASS");
  if (env != nullptr && std::string_view(env) == "tiles") return PackedWidePass::kTokenGroupTiles;
  if (env != nullptr && std::string_view(env) == "sweep") return PackedWidePass::kUnitSweep;
  if (env != nullptr && std::string_view(env) == "amx") {
    if (AmxInt8Runs()) return PackedWidePass::kAmxTiles;
    std::fprintf(stderr, "SPECSERVE_CPU_WIDE_PASS=amx ignored: this CPU (or OS) has no AMX-INT8\n");
  } else if (env != nullptr) {
    std::fprintf(stderr, "SPECSERVE_CPU_WIDE_PASS=%s ignored: use amx, tiles or sweep\n", env);
  }
  if (AmxInt8Runs()) return PackedWidePass::kAmxTiles;
  __builtin_cpu_init();
  return __builtin_cpu_is("amd") ? PackedWidePass::kTokenGroupTiles : PackedWidePass::kUnitSweep;
}
// Q8_0's tiles of 2-5 tokens under kTokenGroupTiles prefetch each group's
// block kPrefetchUnits ahead (Q8_0Kernel) where that was measured to pay:
// AMD family 1Ah and later. On family 19h the same prefetch made them
// slower at 2-5 tokens, and a 4-5 token tile without it was still faster
// than groups of 3 + 2 / 2 + 2 (docs/decisions/0006-q8-0-tile-prefetch.md).
// SPECSERVE_CPU_TILE_PREFETCH=0|1 overrides.
bool DefaultTilePrefetch() {
  const char* env = std::getenv("SPECSERVE_CPU_TILE_PREFETCH");
  if (env != nullptr && (std::string_view(env) == "0" || std::string_view(env) == "1")) return env[0] == '1';
  if (env != nullptr) std::fprintf(stderr, "SPECSERVE_CPU_TILE_PREFETCH=%s ignored: use 0 or 1\n", env);
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  const unsigned base = (eax >> 8) & 0xF;
  const unsigned family = base == 0xF ? base + ((eax >> 20) & 0xFF) : base;
  __builtin_cpu_init();
  return __builtin_cpu_is("amd") && family >= 0x1A;
}
std::atomic<int>& WidePassSlot() {
  static std::atomic<int> slot{static_cast<int>(DefaultPackedWidePass())};
  return slot;
}
}  // namespace

bool PackedTilePrefetch() {
  static const bool on = DefaultTilePrefetch();
  return on;
}

PackedWidePass CurrentPackedWidePass() {
  return static_cast<PackedWidePass>(WidePassSlot().load(std::memory_order_relaxed));
}

void SetPackedWidePass(PackedWidePass order) {
  SPECSERVE_CHECK(order != PackedWidePass::kAmxTiles || AmxInt8Runs());
  WidePassSlot().store(static_cast<int>(order), std::memory_order_relaxed);
}

bool PackedVnniRuns(GgmlType type) {
  static const bool vbmi = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vbmi") != 0;
  }();
  return UseVnniInt8MatMul() && (type != GgmlType::kQ6_K || vbmi);
}

bool PackedKernelRuns(GgmlType type) {
  return UseVnniInt8MatMul() ? PackedVnniRuns(type) : PackedAvx2Runs(type);
}

}  // namespace specserve::cpu

// ---------------------------------------------------------------------------
// The AVX-512 VNNI kernels. Compiled for AVX-512 + VNNI and only called after
// UseVnniInt8MatMul() said the CPU has them; every header is included above
// but the kernels' units (cpu_matmul_packed_units.h), which are compiled here.
#pragma GCC push_options
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx512vbmi,avx2,fma,f16c")

#include "kernels/cpu_matmul_packed_units.h"

namespace specserve::cpu {
namespace {

template <int G, int T>
inline void Zero(__m512 (&acc)[G][T]) {
#pragma GCC unroll 32
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 32
    for (int t = 0; t < T; ++t) acc[g][t] = _mm512_setzero_ps();
}
// y[t * ldy + 16 g + lane] for the lanes (rows) of masks[g].
template <int G, int T>
inline void Store(const __m512 (&acc)[G][T], const __mmask16* masks, float* y, int64_t ldy) {
#pragma GCC unroll 32
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 32
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ldy + kPackedRows * g, masks[g], acc[g][t]);
}

// The next row tile's groups: `groups` of them (0: none), group_bytes apart
// from `first`.
struct NextTile {
  const uint8_t* first = nullptr;
  int groups = 0;
  int64_t group_bytes = 0;
};
// The next row tile's lines, prefetched a few at a time over `steps` calls
// of Step(), one per unit of this tile's token groups (GroupTiles, where a
// kernel's kNextTile says so). A pass of several token groups reads its row
// tile from memory once and from L2 after that; with nothing in flight
// through those L2 passes, memory time and arithmetic add up. Prefetching
// the next tile meanwhile lets memory work through them. At most
// kNextTileBytes of it: a tile of 4 groups x 16 rows x 8192 columns of Q8_0
// is 557 KB, two of them more than a 1 MiB L2. _MM_HINT_T0: T1 was slower
// (docs/decisions/0008-next-tile-prefetch.md).
constexpr int64_t kNextTileBytes = 320 << 10;
class NextTilePrefetch {
 public:
  NextTilePrefetch(const NextTile& next, int64_t steps)
      : next_(next),
        total_(std::min<int64_t>(next.groups * ((next.group_bytes + 63) / 64), kNextTileBytes / 64)),
        per_step_(steps > 0 ? (total_ + steps - 1) / steps : 0) {}
  void Step() {
    for (int64_t i = 0; i < per_step_ && done_ < total_; ++i, ++done_) {
      const int64_t g = done_ % next_.groups, line = done_ / next_.groups;
      _mm_prefetch(reinterpret_cast<const char*>(next_.first + g * next_.group_bytes + 64 * line), _MM_HINT_T0);
    }
  }

 private:
  NextTile next_;
  int64_t total_, per_step_, done_ = 0;
};
// SPECSERVE_CPU_NEXT_TILE=0 turns NextTilePrefetch off (to measure it).
bool NextTilePrefetchOn() {
  static const bool on = [] {
    const char* env = std::getenv("SPECSERVE_CPU_NEXT_TILE");
    return env == nullptr || std::string_view(env) != "0";
  }();
  return on;
}

// Row tiles of 4 groups (64 rows), token groups of up to 3 (Q8_0: 5, see
// Q8_0Kernel in cpu_matmul_packed_units.h): 2 G T accumulators (the float sums and one unit's integer
// dots) within the 32 zmm registers (Q4_K and Q6_K spill a few), and the
// wide tile keeps 4 memory streams going: faster at 5 and 9 tokens than
// tiles of 2 groups x 5 tokens (docs/decisions/0004-int8-token-groups.md).
constexpr int kTileGroups = 4;
// From this many token groups a sweep unpacks a Q4_K or Q6_K unit once for
// all of them (Sweep).
constexpr int kDecodeParts = 4;

// The units' view of tokens t0 .. t0 + nt - 1 (StreamTokens).
StreamTokens TokensOf(const Int8Activations& a, int64_t t0, int nt) {
  StreamTokens s{};
  const std::vector<int32_t>& biases = a.type == GgmlType::kQ8_0 ? a.block_bias : a.sub_bias;
  const int64_t per_token = a.type == GgmlType::kQ8_0 ? a.blocks : a.subs;
  for (int t = 0; t < nt; ++t) {
    s.xs[t] = a.token(t0 + t);
    if (!biases.empty()) s.bias[t] = biases.data() + (t0 + t) * per_token;
    if (a.supers != 0) s.ms[t] = a.token_ms(t0 + t);
  }
  return s;
}

// A stream of at most K::kTileTokens tokens: one row tile times all of them,
// every float sum in a register from the first unit to the last.
// (t0: the first of them within the stream; y is token t0's row.) With
// kFromMemory and 2+ tokens, a kernel with kPrefetchUnits > 0 prefetches
// each group's unit that many units ahead (see Q8_0Kernel); a tile that
// re-reads a row tile from L2 does not. With kSpread, a kernel with
// K::kSpreadTokens >= T prefetches the next unit through the work on this
// one (SpreadPrefetch), so that memory reads stay in flight through the
// arithmetic (docs/decisions/0007-spread-prefetch.md).
// With kNext, `next` (not null) takes a step per unit (GroupTiles).
template <class K, int G, int T, bool kFromMemory, bool kSpread, bool kNext = false>
void Tile(const uint8_t* const* grp, const __mmask16* masks, int64_t nu, const StreamTokens& st, int t0, float* y,
          int64_t ldy, NextTilePrefetch* next = nullptr) {
  __m512 acc[G][T];
  Zero<G, T>(acc);
  // Whether this tile prefetches is known when it is compiled (kAhead and
  // kNext): a pointer that is null only at run time left a test per step in
  // the unit's inner loop, which slowed Q4_K's tiles even where nothing
  // prefetched (docs/decisions/0007-spread-prefetch.md).
  constexpr bool kAhead = kSpread && T <= K::kSpreadTokens;
  SpreadPrefetch<G> ahead(grp, K::kBytes);
  SpreadPrefetch<G>* const pa = kAhead ? &ahead : nullptr;
  for (int64_t u = 0; u < nu; ++u) {
    if constexpr (kAhead) ahead.Plan(u, nu, K::template AheadSteps<G, T>());
    if constexpr (kFromMemory && K::kPrefetchUnits > 0 && T >= 2) {
#pragma GCC unroll 32
      for (int g = 0; g < G; ++g) {
        const char* p = reinterpret_cast<const char*>(grp[g] + K::kBytes * (u + K::kPrefetchUnits));
#pragma GCC unroll 16
        for (int64_t l = 0; l < K::kBytes; l += 64) _mm_prefetch(p + l, _MM_HINT_T0);
      }
    }
    if constexpr (kNext) next->Step();
    K::template Unit<G, T>(grp, u, st, t0, acc, pa);
  }
  Store<G, T>(acc, masks, y, ldy);
}

// Tile, never inlined, for the 4-5 token tiles: inlined into Rows, the
// 5-token Q8_0 tile ran slower. The tiles of 1-3 tokens stay inlined:
// apart, Q4_K's ran slower (docs/decisions/0004-int8-token-groups.md).
template <class K, int G, int T, bool kFromMemory, bool kSpread, bool kNext>
__attribute__((noinline)) void TileApart(const uint8_t* const* grp, const __mmask16* masks, int64_t nu,
                                         const StreamTokens& st, int t0, float* y, int64_t ldy,
                                         NextTilePrefetch* next) {
  Tile<K, G, T, kFromMemory, kSpread, kNext>(grp, masks, nu, st, t0, y, ldy, next);
}

// Tile<K, G, T> for T = nt <= K::kTileTokens.
template <class K, int G, bool kFromMemory, bool kSpread = false, bool kNext = false>
void TileOf(int nt, const uint8_t* const* grp, const __mmask16* masks, int64_t nu, const StreamTokens& st, int t0,
            float* y, int64_t ldy, NextTilePrefetch* next = nullptr) {
  static_assert(K::kTileTokens >= kMaxTokens && K::kTileTokens <= 5);
  switch (nt) {
    case 1: return Tile<K, G, 1, kFromMemory, kSpread, kNext>(grp, masks, nu, st, t0, y, ldy, next);
    case 2: return Tile<K, G, 2, kFromMemory, kSpread, kNext>(grp, masks, nu, st, t0, y, ldy, next);
    case 3: return Tile<K, G, 3, kFromMemory, kSpread, kNext>(grp, masks, nu, st, t0, y, ldy, next);
    default:
      if constexpr (K::kTileTokens >= 5) {
        if (nt == 5) return TileApart<K, G, 5, kFromMemory, kSpread, kNext>(grp, masks, nu, st, t0, y, ldy, next);
      }
      if constexpr (K::kTileTokens >= 4) {
        if (nt == 4) return TileApart<K, G, 4, kFromMemory, kSpread, kNext>(grp, masks, nu, st, t0, y, ldy, next);
      }
      SPECSERVE_CHECK(false);
  }
}

// A stream of more tokens than one tile takes, as token groups of at most
// kMaxTokens (sizes as even as they go), each a Tile over the whole row
// tile: the first group reads the tile from memory, the others from L2 (a
// row tile of this kernel is at most 4 groups x 16 rows x 8192 columns: 557
// KB of Q8_0). PackedWidePass::kTokenGroupTiles. Even groups of at most 3,
// none prefetching: a prefetching first group (of 5, or of 3) was slower
// (docs/decisions/0004-int8-token-groups.md).
template <class K, int G>
void GroupTiles(const uint8_t* const* grp, const __mmask16* masks, int64_t nu, const StreamTokens& st, int nt,
                float* y, int64_t ldy, const NextTile& next_tile) {
  const int parts = (nt + kMaxTokens - 1) / kMaxTokens;
  NextTilePrefetch next(next_tile, parts * nu);
  bool ahead = false;
  if constexpr (K::kNextTile) ahead = NextTilePrefetchOn() && next_tile.groups > 0;
  for (int p = 0, t = 0; p < parts; ++p) {
    const int size = (nt - t) / (parts - p);
    float* const yp = y + t * ldy;
    if (ahead) {
      if constexpr (K::kNextTile) TileOf<K, G, false, false, true>(size, grp, masks, nu, st, t, yp, ldy, &next);
    } else {
      TileOf<K, G, false>(size, grp, masks, nu, st, t, yp, ldy);
    }
    t += size;
  }
}

// A kernel whose codes need unpacking (Q4_K, Q6_K) names a Decoded<G> unit.
template <class K, int G>
concept Decodes = requires { typename K::template Decoded<G>; };

// One unit for the token group at t0 of `size` tokens, its float sums kept
// in sums[G][kStreamTokens] between units; the unit from the packed bytes,
// or from `dec` when not null (Decodes).
template <class K, int G, int T, class Dec>
inline void SweepPart(const uint8_t* const* grp, const Dec* dec, int64_t u, const StreamTokens& st, int t0,
                      __m512 (&sums)[G][kStreamTokens], SpreadPrefetch<G>* ahead) {
  __m512 acc[G][T];
#pragma GCC unroll 32
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 32
    for (int t = 0; t < T; ++t) acc[g][t] = sums[g][t0 + t];
  if constexpr (Decodes<K, G>) {
    if (dec != nullptr) {
      K::template UnitFrom<G, T>(*dec, u, st, t0, acc);
    } else {
      K::template Unit<G, T>(grp, u, st, t0, acc, ahead);
    }
  } else {
    K::template Unit<G, T>(grp, u, st, t0, acc, ahead);
  }
#pragma GCC unroll 32
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 32
    for (int t = 0; t < T; ++t) sums[g][t0 + t] = acc[g][t];
}

// A stream of more tokens: the row tile is read once, unit by unit, and each
// unit, while it is in L1, goes to every token group in turn, the float sums
// of all the stream's tokens kept in memory (L1). So the weights stream from
// memory without a pause. (Before, each token group read the whole tile in
// turn, the later ones from L2 with no memory read in flight.) One token
// stays on Tile: the sweep is slower there. Q4_K's and Q6_K's units are
// unpacked once, into 20 KiB of L1, for all token groups: each group
// unpacking the codes itself cost more than its dot products
// (docs/decisions/0002-sweep-unpacks-once.md).
template <class K, int G>
void Sweep(const uint8_t* const* grp, const __mmask16* masks, int64_t nu, const StreamTokens& st, int nt,
           float* y, int64_t ldy) {
  const int parts = (nt + kMaxTokens - 1) / kMaxTokens;
  int sizes[kStreamTokens];
  int steps = 0;  // SpreadPrefetch steps per unit, over all parts
  for (int p = 0, t = 0; p < parts; ++p) {
    sizes[p] = (nt - t) / (parts - p);
    t += sizes[p];
    if constexpr (K::kSpreadTokens >= kMaxTokens) {
      steps += sizes[p] == 1   ? K::template AheadSteps<G, 1>()
               : sizes[p] == 2 ? K::template AheadSteps<G, 2>()
                               : K::template AheadSteps<G, 3>();
    }
  }
  __m512 sums[G][kStreamTokens];
  for (int g = 0; g < G; ++g)
    for (int t = 0; t < nt; ++t) sums[g][t] = _mm512_setzero_ps();
  struct None {};
  using Dec = decltype([] {
    if constexpr (Decodes<K, G>) {
      return typename K::template Decoded<G>{};
    } else {
      return None{};
    }
  }());
  Dec dec;
  const bool decode = parts >= kDecodeParts;
  constexpr bool kSpread = K::kSpreadTokens >= kMaxTokens;
  SpreadPrefetch<G> ahead(grp, K::kBytes);
  SpreadPrefetch<G>* pa = kSpread ? &ahead : nullptr;
  if constexpr (Decodes<K, G>) dec.ahead = pa;
  for (int64_t u = 0; u < nu; ++u) {
    if constexpr (kSpread) ahead.Plan(u, nu, steps);
    const Dec* from = nullptr;
    if constexpr (Decodes<K, G>) {
      if (decode) {
        dec.Fill(grp, u);
        from = &dec;
      }
    }
    for (int p = 0, t = 0; p < parts; t += sizes[p], ++p) {
      switch (sizes[p]) {
        case 1: SweepPart<K, G, 1>(grp, from, u, st, t, sums, pa); break;
        case 2: SweepPart<K, G, 2>(grp, from, u, st, t, sums, pa); break;
        default: SweepPart<K, G, 3>(grp, from, u, st, t, sums, pa); break;
      }
    }
  }
  for (int g = 0; g < G; ++g)
    for (int t = 0; t < nt; ++t) _mm512_mask_storeu_ps(y + t * ldy + kPackedRows * g, masks[g], sums[g][t]);
}

template <class K, int G>
void Rows(const MatrixView& w, const Int8Activations& a, float* y, int64_t r0, int64_t r1) {
  const PackedWidePass wide = CurrentPackedWidePass();
  const bool prefetch = PackedTilePrefetch();
  const int64_t nu = w.cols / K::kCols, group_bytes = nu * K::kBytes;
  const int64_t g0 = r0 / kPackedRows, g1 = (r1 + kPackedRows - 1) / kPackedRows;
  for (int64_t t0 = 0; t0 < a.T; t0 += kStreamTokens) {
    const int nt = static_cast<int>(std::min<int64_t>(kStreamTokens, a.T - t0));
    const StreamTokens st = TokensOf(a, t0, nt);
    for (int64_t g = g0; g < g1; g += G) {
      const uint8_t* grp[G];
      __mmask16 masks[G];
      TileGroups<G>(w.packed, group_bytes, g, g1, r0, r1, grp, masks);
      // The row tile after this one (none after the last of the stream's
      // last pass over [r0, r1)).
      const bool last = g + G >= g1 && t0 + kStreamTokens >= a.T;
      const int64_t ng = g + G < g1 ? g + G : g0;
      const NextTile next_tile{w.packed + ng * group_bytes,
                               last ? 0 : static_cast<int>(std::min<int64_t>(G, g1 - ng)), group_bytes};
      float* yt = y + t0 * w.rows + g * kPackedRows;
      // The sweep order keeps what was measured on Intel VNNI cores: small
      // tiles without the burst prefetch (kFromMemory false) but with
      // SpreadPrefetch (Q4_K, Q6_K), wider passes swept.
      // (kAmxTiles: the passes MatMulPackedAmx does not take, the same.)
      if (wide == PackedWidePass::kTokenGroupTiles) {
        // Q4_K's and Q6_K's 5-token passes run as token groups of 3 + 2:
        // the 5-token tile spills registers, and 3 + 2 was the faster on
        // every AMD core measured; at 4 tokens one tile is the faster
        // (docs/decisions/0004-int8-token-groups.md).
        const bool one_tile = nt <= K::kTileTokens && (nt < 5 || !Decodes<K, G>);
        if (one_tile && prefetch) {
          TileOf<K, G, true>(nt, grp, masks, nu, st, 0, yt, w.rows);
        } else if (one_tile) {
          TileOf<K, G, false>(nt, grp, masks, nu, st, 0, yt, w.rows);
        } else {
          GroupTiles<K, G>(grp, masks, nu, st, nt, yt, w.rows, next_tile);
        }
      } else if (nt <= K::kSweepTileTokens) {
        TileOf<K, G, false, /*kSpread=*/true>(nt, grp, masks, nu, st, 0, yt, w.rows);
      } else {
        Sweep<K, G>(grp, masks, nu, st, nt, yt, w.rows);
      }
    }
  }
}

}  // namespace

void MatMulPackedVnni(const MatrixView& w, const Int8Activations& a, float* y, int64_t r0, int64_t r1) {
  SPECSERVE_CHECK(w.packed != nullptr && PackableForInt8(w) && PackedVnniRuns(w.type) && a.type == w.type &&
                  a.n == w.cols);
  if (a.T == 0 || r0 >= r1) return;
  if (a.T >= AmxMinTokens(w.type) && CurrentPackedWidePass() == PackedWidePass::kAmxTiles && PackedAmxRuns(w.type)) {
    return MatMulPackedAmx(w, a, y, r0, r1);
  }
  switch (w.type) {
    case GgmlType::kQ8_0: return Rows<Q8_0Kernel, kTileGroups>(w, a, y, r0, r1);
    case GgmlType::kQ4_K: return Rows<Q4_KKernel, kTileGroups>(w, a, y, r0, r1);
    default: return Rows<Q6_KKernel, kTileGroups>(w, a, y, r0, r1);
  }
}

}  // namespace specserve::cpu

#pragma GCC diagnostic pop
#pragma GCC pop_options
