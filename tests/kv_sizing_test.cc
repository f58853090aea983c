// The KV pool's size from free device memory (common/kv_sizing.h), the
// arithmetic the CUDA backend runs after uploading its weights; pure host
// code, so it is tested here without a device.
#include "common/kv_sizing.h"

#include <gtest/gtest.h>

#include "common/kv_cache.h"

namespace specserve {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;

// A Llama-8B-like cache: 32 layers, 8 KV heads of 128: 256 KiB per position
// (fp32 K and V), 4 MiB per block of 16; a context of 8192 is 512 blocks, 2 GiB.
ModelConfig Config() {
  ModelConfig c;
  c.n_layer = 32;
  c.n_head = 32;
  c.n_head_kv = 8;
  c.head_dim = 128;
  c.n_ctx = 8192;
  return c;
}

BackendOptions Options(int32_t contexts, int64_t memory_mib = 0) {
  BackendOptions o;
  o.kind = "cuda";
  o.kv_block_size = 16;
  o.kv_contexts = contexts;
  o.kv_memory_mib = memory_mib;
  return o;
}

TEST(KvSizing, BytesPerPositionAndHeadroom) {
  EXPECT_EQ(KvBytesPerPosition(Config()), 256 * 1024);
  EXPECT_EQ(KvHeadroomBytes(0), kGiB);             // at least 1 GiB
  EXPECT_EQ(KvHeadroomBytes(4 * kGiB), kGiB);      // 10% would be less
  EXPECT_EQ(KvHeadroomBytes(100 * kGiB), 10 * kGiB);
}

TEST(KvSizing, SessionsBindWhenMemoryIsPlenty) {
  const ModelConfig c = Config();
  const int64_t bpp = KvBytesPerPosition(c);
  absl::StatusOr<KvPoolSize> s = KvBlocksFromFreeMemory(c, Options(4), bpp, 100 * kGiB);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->blocks, 4 * 512);
  EXPECT_EQ(s->limit, KvLimit::kSessions);
  EXPECT_EQ(s->headroom_bytes, 10 * kGiB);
  EXPECT_EQ(s->Describe(16, bpp, 4), "2048 KV blocks of 16 (8192 MiB): --max-sessions 4 full contexts");
}

TEST(KvSizing, FreeMemoryBindsLessTheHeadroom) {
  const ModelConfig c = Config();
  const int64_t bpp = KvBytesPerPosition(c);
  // 64 contexts want 128 GiB; 40 GiB free keeps 4 GiB: 36 GiB / 4 MiB = 9216 blocks.
  absl::StatusOr<KvPoolSize> s = KvBlocksFromFreeMemory(c, Options(64), bpp, 40 * kGiB);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->blocks, 9216);
  EXPECT_EQ(s->limit, KvLimit::kFreeMemory);
  EXPECT_EQ(s->Describe(16, bpp, 64),
            "9216 KV blocks of 16 (36864 MiB): free device memory (40960 MiB free, 4096 MiB kept)");
  // Small free memory: the 1 GiB floor of the headroom. 4 GiB free: 3 GiB = 768 blocks.
  s = KvBlocksFromFreeMemory(c, Options(64), bpp, 4 * kGiB);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->blocks, 768);
  EXPECT_EQ(s->limit, KvLimit::kFreeMemory);
}

TEST(KvSizing, AGivenMemoryFlagCapsButNeverBelowOneContext) {
  const ModelConfig c = Config();
  const int64_t bpp = KvBytesPerPosition(c);
  absl::StatusOr<KvPoolSize> s = KvBlocksFromFreeMemory(c, Options(64, 4096), bpp, 100 * kGiB);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->blocks, 1024);  // 4096 MiB / 4 MiB
  EXPECT_EQ(s->limit, KvLimit::kMemoryFlag);
  s = KvBlocksFromFreeMemory(c, Options(64, 1), bpp, 100 * kGiB);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->blocks, 512);   // one full context, as DefaultKvBlocks
  EXPECT_EQ(s->limit, KvLimit::kMemoryFlag);
  // The flag above what is free: free memory still binds.
  s = KvBlocksFromFreeMemory(c, Options(64, 1 << 20), bpp, 10 * kGiB);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->blocks, 9 * 256);  // 10 GiB less 1 GiB
  EXPECT_EQ(s->limit, KvLimit::kFreeMemory);
  // The flag above what the sessions need: the sessions bind.
  s = KvBlocksFromFreeMemory(c, Options(2, 1 << 20), bpp, 100 * kGiB);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->blocks, 1024);
  EXPECT_EQ(s->limit, KvLimit::kSessions);
}

TEST(KvSizing, OneContextThatDoesNotFitSaysWhatIsFreeAndWhatToChange) {
  const ModelConfig c = Config();
  // 2.5 GiB free keeps 1 GiB: 1.5 GiB for a context of 2 GiB.
  absl::StatusOr<KvPoolSize> s =
      KvBlocksFromFreeMemory(c, Options(8), KvBytesPerPosition(c), 2 * kGiB + 512 * kMiB);
  ASSERT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted) << s.status();
  const std::string m(s.status().message());
  EXPECT_NE(m.find("2560 MiB of device memory are free"), std::string::npos) << m;
  EXPECT_NE(m.find("1024 MiB stay free as headroom"), std::string::npos) << m;
  EXPECT_NE(m.find("one context of 8192 positions needs 2048 MiB"), std::string::npos) << m;
  EXPECT_NE(m.find("--kv-blocks"), std::string::npos) << m;
  EXPECT_NE(m.find("--max-sessions"), std::string::npos) << m;
  EXPECT_NE(m.find("smaller context"), std::string::npos) << m;
  // Nothing free at all: the same error, not a pool of 0 blocks.
  EXPECT_EQ(KvBlocksFromFreeMemory(c, Options(8), KvBytesPerPosition(c), 0).status().code(),
            absl::StatusCode::kResourceExhausted);
}

// kv_memory_mib 0 (the flag not given) is 1024 MiB on the CPU's DefaultKvBlocks.
TEST(KvSizing, UnsetMemoryFlagIsTheCpuDefault) {
  const ModelConfig c = Config();
  const int64_t bpp = KvBytesPerPosition(c);
  EXPECT_EQ(DefaultKvBlocks(c, Options(64, 0), bpp), DefaultKvBlocks(c, Options(64, kDefaultKvMemoryMib), bpp));
  EXPECT_EQ(DefaultKvBlocks(c, Options(64, 0), bpp), 512);  // 1024 MiB < one context: one context
}

}  // namespace
}  // namespace specserve
