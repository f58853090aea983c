// Unit tests for common/kv_cache.h: the paged KV block pool. Reserve /
// Truncate / Release accounting, all-or-nothing RESOURCE_EXHAUSTED, blocks
// coming back to the pool, and use from several threads.
#include "common/kv_cache.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include "common/backend.h"
#include "gtest/gtest.h"

namespace specserve {
namespace {

TEST(KvPool, FreshPoolIsAllFree) {
  KvPool pool(8, 16);
  EXPECT_EQ(pool.num_blocks(), 8);
  EXPECT_EQ(pool.block_size(), 16);
  EXPECT_EQ(pool.free_blocks(), 8);
  EXPECT_EQ(pool.used_blocks(), 0);
}

TEST(KvPool, BlocksForRoundsUp) {
  EXPECT_EQ(KvPool::BlocksFor(0, 16), 0);
  EXPECT_EQ(KvPool::BlocksFor(1, 16), 1);
  EXPECT_EQ(KvPool::BlocksFor(16, 16), 1);
  EXPECT_EQ(KvPool::BlocksFor(17, 16), 2);
  EXPECT_EQ(KvPool::BlocksFor(5, 1), 5);
}

TEST(KvPool, ReserveGrowsToCoverPositions) {
  KvPool pool(8, 16);
  KvSeq seq;
  ASSERT_TRUE(pool.Reserve(seq, 1).ok());
  EXPECT_EQ(seq.blocks.size(), 1u);
  EXPECT_EQ(pool.free_blocks(), 7);
  ASSERT_TRUE(pool.Reserve(seq, 16).ok());  // still fits the first block
  EXPECT_EQ(seq.blocks.size(), 1u);
  ASSERT_TRUE(pool.Reserve(seq, 17).ok());
  EXPECT_EQ(seq.blocks.size(), 2u);
  const std::vector<int32_t> before = seq.blocks;
  ASSERT_TRUE(pool.Reserve(seq, 50).ok());  // 4 blocks; the old ones stay first
  ASSERT_EQ(seq.blocks.size(), 4u);
  EXPECT_TRUE(std::equal(before.begin(), before.end(), seq.blocks.begin()));
  ASSERT_TRUE(pool.Reserve(seq, 3).ok());   // smaller: no change
  ASSERT_TRUE(pool.Reserve(seq, 0).ok());
  EXPECT_EQ(seq.blocks.size(), 4u);
  EXPECT_EQ(pool.used_blocks(), 4);
  EXPECT_EQ(seq.length, 0);  // Reserve gives slots; it does not make them valid
}

TEST(KvPool, BlockIdsAreDistinctAndInRange) {
  KvPool pool(10, 4);
  std::vector<KvSeq> seqs(4);
  ASSERT_TRUE(pool.Reserve(seqs[0], 4).ok());
  ASSERT_TRUE(pool.Reserve(seqs[1], 9).ok());
  ASSERT_TRUE(pool.Reserve(seqs[2], 12).ok());
  ASSERT_TRUE(pool.Reserve(seqs[3], 10).ok());
  EXPECT_EQ(pool.free_blocks(), 0);
  std::set<int32_t> ids;
  for (const KvSeq& s : seqs) {
    for (int32_t b : s.blocks) {
      EXPECT_GE(b, 0);
      EXPECT_LT(b, 10);
      EXPECT_TRUE(ids.insert(b).second) << "block " << b << " handed out twice";
    }
  }
  EXPECT_EQ(ids.size(), 10u);
}

TEST(KvPool, FillingExactlySucceedsOneMoreIsExhausted) {
  KvPool pool(4, 8);
  KvSeq seq;
  ASSERT_TRUE(pool.Reserve(seq, 32).ok());
  EXPECT_EQ(pool.free_blocks(), 0);
  const absl::Status st = pool.Reserve(seq, 33);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_EQ(seq.blocks.size(), 4u);
  EXPECT_EQ(pool.free_blocks(), 0);
}

TEST(KvPool, ExhaustedChangesNothing) {
  KvPool pool(5, 16);
  KvSeq a, b;
  ASSERT_TRUE(pool.Reserve(a, 48).ok());  // 3 blocks
  a.length = 40;
  const KvSeq a_before = a;
  // a needs 3 more blocks, only 2 are free: no partial grant.
  absl::Status st = pool.Reserve(a, 96);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_EQ(a.blocks, a_before.blocks);
  EXPECT_EQ(a.length, 40);
  EXPECT_EQ(pool.free_blocks(), 2);
  // An empty sequence asking for too much stays empty.
  st = pool.Reserve(b, 100);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_TRUE(b.blocks.empty());
  EXPECT_EQ(pool.free_blocks(), 2);
  // What does fit is still granted afterwards.
  ASSERT_TRUE(pool.Reserve(b, 32).ok());
  EXPECT_EQ(pool.free_blocks(), 0);
}

TEST(KvPool, TruncateKeepsPrefixAndFreesTheRest) {
  KvPool pool(8, 16);
  KvSeq seq;
  ASSERT_TRUE(pool.Reserve(seq, 64).ok());  // 4 blocks
  seq.length = 64;
  const std::vector<int32_t> full = seq.blocks;
  pool.Truncate(seq, 33);  // positions 0..32 need 3 blocks
  EXPECT_EQ(seq.length, 33);
  ASSERT_EQ(seq.blocks.size(), 3u);
  EXPECT_TRUE(std::equal(seq.blocks.begin(), seq.blocks.end(), full.begin()));
  EXPECT_EQ(pool.free_blocks(), 5);
  pool.Truncate(seq, 32);  // exactly 2 blocks
  EXPECT_EQ(seq.blocks.size(), 2u);
  EXPECT_EQ(pool.free_blocks(), 6);
  pool.Truncate(seq, 32);  // same length: nothing more to free
  EXPECT_EQ(seq.blocks.size(), 2u);
  EXPECT_EQ(pool.free_blocks(), 6);
  pool.Truncate(seq, 20);  // still inside block 1
  EXPECT_EQ(seq.length, 20);
  EXPECT_EQ(seq.blocks.size(), 2u);
  pool.Truncate(seq, 0);
  EXPECT_TRUE(seq.blocks.empty());
  EXPECT_EQ(pool.free_blocks(), 8);
}

TEST(KvPool, TruncateFreesReservedSlotsPastTheLength) {
  KvPool pool(8, 16);
  KvSeq seq;
  ASSERT_TRUE(pool.Reserve(seq, 64).ok());  // reserved for a round of drafts
  seq.length = 10;                          // only 10 positions were committed
  pool.Truncate(seq, 10);
  EXPECT_EQ(seq.blocks.size(), 1u);
  EXPECT_EQ(pool.free_blocks(), 7);
}

TEST(KvPool, ReleaseReturnsEverythingAndIsIdempotent) {
  KvPool pool(6, 4);
  KvSeq a, b;
  ASSERT_TRUE(pool.Reserve(a, 10).ok());
  a.length = 10;
  ASSERT_TRUE(pool.Reserve(b, 8).ok());
  EXPECT_EQ(pool.free_blocks(), 1);
  pool.Release(a);
  EXPECT_TRUE(a.blocks.empty());
  EXPECT_EQ(a.length, 0);
  EXPECT_EQ(pool.free_blocks(), 4);
  pool.Release(a);  // again: no change, no double free
  EXPECT_EQ(pool.free_blocks(), 4);
  KvSeq never_reserved;
  pool.Release(never_reserved);
  EXPECT_EQ(pool.free_blocks(), 4);
  pool.Release(b);
  pool.Release(b);
  EXPECT_EQ(pool.free_blocks(), 6);
  EXPECT_EQ(pool.used_blocks(), 0);
}

TEST(KvPool, ReleasedBlocksCanBeReservedAgain) {
  KvPool pool(4, 16);
  for (int round = 0; round < 10; ++round) {
    KvSeq seq;
    ASSERT_TRUE(pool.Reserve(seq, 64).ok()) << "round " << round;
    std::set<int32_t> ids(seq.blocks.begin(), seq.blocks.end());
    EXPECT_EQ(ids, (std::set<int32_t>{0, 1, 2, 3}));
    KvSeq other;
    EXPECT_EQ(pool.Reserve(other, 1).code(), absl::StatusCode::kResourceExhausted);
    pool.Release(seq);
  }
  EXPECT_EQ(pool.free_blocks(), 4);
}

TEST(KvPoolDeathTest, TruncateNeverGrows) {
  KvPool pool(4, 16);
  KvSeq seq;
  ASSERT_TRUE(pool.Reserve(seq, 32).ok());
  seq.length = 5;
  EXPECT_DEATH(pool.Truncate(seq, 6), "invariant violated");
}

TEST(KvPool, ConcurrentReserveAndReleaseKeepAccounting) {
  constexpr int kThreads = 4, kIters = 2000;
  KvPool pool(32, 4);
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&pool, &failures, t] {
      KvSeq seq;
      for (int i = 0; i < kIters; ++i) {
        const int32_t want = 1 + (i * 7 + t * 13) % 40;  // up to 10 blocks
        absl::Status st = pool.Reserve(seq, want);
        if (st.ok()) {
          if (static_cast<int32_t>(seq.blocks.size()) < KvPool::BlocksFor(want, 4)) ++failures[t];
          seq.length = want;
          pool.Truncate(seq, want / 2);
        } else if (st.code() != absl::StatusCode::kResourceExhausted) {
          ++failures[t];
        }
        if (i % 3 == 0) pool.Release(seq);
      }
      pool.Release(seq);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  EXPECT_EQ(pool.free_blocks(), 32);
  // Every id came back exactly once: reserving the whole pool gives 0..31.
  KvSeq all;
  ASSERT_TRUE(pool.Reserve(all, 128).ok());
  EXPECT_EQ(std::set<int32_t>(all.blocks.begin(), all.blocks.end()).size(), 32u);
}

}  // namespace
}  // namespace specserve

namespace specserve {

// The default pool: --max-sessions full contexts, within the memory budget,
// never less than one context (the eval load was refused at 13 sessions when
// it held 8 contexts whatever --max-sessions said).
TEST(DefaultKvBlocks, HoldsMaxSessionsContextsWithinTheBudget) {
  ModelConfig c;
  c.n_ctx = 1024;
  BackendOptions o;
  o.kv_block_size = 16;
  o.kv_contexts = 64;
  o.kv_memory_mib = 1024;
  const int64_t per_position = 14 * 1024;  // about the bundled 7m target's fp32 K and V
  EXPECT_EQ(DefaultKvBlocks(c, o, per_position), 64 * 64);
  o.kv_memory_mib = 100;  // 100 MiB / (16 * 14 KiB) = 457 blocks
  EXPECT_EQ(DefaultKvBlocks(c, o, per_position), (100 << 20) / (16 * per_position));
  o.kv_memory_mib = 1;    // never below one full context
  EXPECT_EQ(DefaultKvBlocks(c, o, per_position), 64);
}

}  // namespace specserve
