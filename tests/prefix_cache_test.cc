// Prefix caching in the KV pool (common/kv_cache.h): whole blocks of a
// published prompt are attached by later sequences with the same tokens,
// shared by reference count, kept after their last holder as long as there
// is room, evicted least recently used first, and never rewritten while
// shared.
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "common/kv_cache.h"

namespace specserve {
namespace {

constexpr int32_t kBlock = 4;

std::vector<TokenId> Tokens(int n, int salt = 0) {
  std::vector<TokenId> t(n);
  for (int i = 0; i < n; ++i) t[i] = 100 + i + 1000 * salt;
  return t;
}

// A sequence that has computed `tokens` (what a prefill leaves); its own
// lookup counts as a query.
KvSeq Computed(KvPool& pool, const std::vector<TokenId>& tokens) {
  KvSeq s;
  pool.AttachPrefix(s, tokens);
  EXPECT_TRUE(pool.Reserve(s, static_cast<int32_t>(tokens.size())).ok());
  s.length = static_cast<int32_t>(tokens.size());
  return s;
}

TEST(PrefixCache, OffByDefault) {
  KvPool pool(16, kBlock);
  const auto t = Tokens(12);
  KvSeq a = Computed(pool, t);
  pool.PublishPrefix(a, t);
  KvSeq b;
  EXPECT_EQ(pool.AttachPrefix(b, t), 0);
  EXPECT_TRUE(b.blocks.empty());
  EXPECT_EQ(pool.prefix_stats().queries, 0);
  pool.Release(a);
  EXPECT_EQ(pool.free_blocks(), 16);
}

TEST(PrefixCache, ALaterSequenceAttachesThePublishedWholeBlocks) {
  KvPool pool(16, kBlock);
  pool.EnablePrefixCache();
  const auto t = Tokens(10);  // 2 whole blocks and 2 positions
  KvSeq a = Computed(pool, t);
  pool.PublishPrefix(a, t);
  KvSeq b;
  EXPECT_EQ(pool.AttachPrefix(b, t), 8);
  EXPECT_EQ(b.length, 8);
  ASSERT_EQ(b.blocks.size(), 2u);
  EXPECT_EQ(b.blocks[0], a.blocks[0]);
  EXPECT_EQ(b.blocks[1], a.blocks[1]);
  // b grows into blocks of its own.
  ASSERT_TRUE(pool.Reserve(b, 12).ok());
  EXPECT_NE(b.blocks[2], a.blocks[2]);
  const KvPool::PrefixStats s = pool.prefix_stats();
  EXPECT_EQ(s.queries, 2);  // a's own lookup (a miss) and b's
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.hit_tokens, 8);
  pool.Release(a);
  pool.Release(b);
  // The two published blocks stay cached, and count as free.
  EXPECT_EQ(pool.prefix_stats().cached_blocks, 2);
  EXPECT_EQ(pool.free_blocks(), 16);
  EXPECT_EQ(pool.used_blocks(), 0);
}

TEST(PrefixCache, OnlyTheCommonWholeBlocksAreShared) {
  KvPool pool(16, kBlock);
  pool.EnablePrefixCache();
  const auto t = Tokens(12);
  KvSeq a = Computed(pool, t);
  pool.PublishPrefix(a, t);
  auto u = t;
  u[5] = 7;  // differs in the second block
  KvSeq b;
  EXPECT_EQ(pool.AttachPrefix(b, u), 4);
  // The same tokens after a different first block are another prefix.
  auto v = t;
  v[0] = 7;
  KvSeq c;
  EXPECT_EQ(pool.AttachPrefix(c, v), 0);
  // Shorter than a block: nothing to look up.
  KvSeq d;
  EXPECT_EQ(pool.AttachPrefix(d, Tokens(3)), 0);
  EXPECT_EQ(pool.prefix_stats().queries, 3);  // a, b and c; d had no whole block
  EXPECT_EQ(pool.prefix_stats().hits, 1);
  for (KvSeq* s : {&a, &b, &c, &d}) pool.Release(*s);
  EXPECT_EQ(pool.free_blocks(), 16);
}

TEST(PrefixCache, ASharedBlockOutlivesItsPublisher) {
  KvPool pool(16, kBlock);
  pool.EnablePrefixCache();
  const auto t = Tokens(8);
  KvSeq a = Computed(pool, t);
  pool.PublishPrefix(a, t);
  KvSeq b;
  ASSERT_EQ(pool.AttachPrefix(b, t), 8);
  pool.Release(a);
  EXPECT_EQ(pool.used_blocks(), 2);           // b still holds both
  EXPECT_EQ(pool.prefix_stats().cached_blocks, 0);
  KvSeq c;
  EXPECT_EQ(pool.AttachPrefix(c, t), 8);      // and a third sequence finds them
  pool.Release(b);
  pool.Release(c);
  EXPECT_EQ(pool.prefix_stats().cached_blocks, 2);
}

TEST(PrefixCache, CachedBlocksAreEvictedLeastRecentlyUsedFirstWhenRoomIsNeeded) {
  KvPool pool(6, kBlock);
  pool.EnablePrefixCache();
  const auto old_prompt = Tokens(8, 1), new_prompt = Tokens(8, 2);
  for (const auto* t : {&old_prompt, &new_prompt}) {
    KvSeq s = Computed(pool, *t);
    pool.PublishPrefix(s, *t);
    pool.Release(s);
  }
  EXPECT_EQ(pool.prefix_stats().cached_blocks, 4);
  EXPECT_EQ(pool.free_blocks(), 6);
  // Four blocks: the two free ones, then the old prompt's two.
  KvSeq big;
  ASSERT_TRUE(pool.Reserve(big, 16).ok());
  EXPECT_EQ(pool.prefix_stats().cached_blocks, 2);
  KvSeq x, y;
  EXPECT_EQ(pool.AttachPrefix(x, old_prompt), 0);
  EXPECT_EQ(pool.AttachPrefix(y, new_prompt), 8);
  // Everything in use: one more block is exhausted, and nothing changed.
  KvSeq z;
  EXPECT_EQ(pool.Reserve(z, 1).code(), absl::StatusCode::kResourceExhausted);
  for (KvSeq* s : {&big, &x, &y, &z}) pool.Release(*s);
  EXPECT_EQ(pool.free_blocks(), 6);
}

TEST(PrefixCache, RollingBackIntoAPublishedBlockTakesItOutOfTheCache) {
  KvPool pool(8, kBlock);
  pool.EnablePrefixCache();
  const auto t = Tokens(8);
  KvSeq a = Computed(pool, t);
  pool.PublishPrefix(a, t);
  pool.Truncate(a, 6);  // the second block will be written again
  KvSeq b;
  EXPECT_EQ(pool.AttachPrefix(b, t), 4);  // only the first block is still cached
  pool.Release(a);
  pool.Release(b);
  EXPECT_EQ(pool.free_blocks(), 8);
}

TEST(PrefixCache, PublishingTwiceOrTheSameTokensFromAnotherSequenceKeepsOneEntry) {
  KvPool pool(16, kBlock);
  pool.EnablePrefixCache();
  const auto t = Tokens(8);
  KvSeq a = Computed(pool, t);
  KvSeq b = Computed(pool, t);  // computed before a was published
  pool.PublishPrefix(a, t);
  pool.PublishPrefix(a, t);
  pool.PublishPrefix(b, t);
  KvSeq c;
  ASSERT_EQ(pool.AttachPrefix(c, t), 8);
  EXPECT_EQ(c.blocks, std::vector<int32_t>(a.blocks.begin(), a.blocks.begin() + 2));
  for (KvSeq* s : {&a, &b, &c}) pool.Release(*s);
  EXPECT_EQ(pool.prefix_stats().cached_blocks, 2);  // b's copies went back to the free list
  EXPECT_EQ(pool.free_blocks(), 16);
}

}  // namespace
}  // namespace specserve
