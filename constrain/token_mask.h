// Token-level constraint: which vocabulary entries a GrammarMatcher allows
// next. The vocabulary is a byte trie built once per model; a mask walks it
// once, depth first, carrying a forked matcher and pruning a subtree as soon
// as its prefix is refused, so a position costs far less than running every
// token's bytes. Masks are cached by matcher state in a MaskCache shared by
// the matchers of one grammar (thread-safe, LRU-bounded).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/tokenizer.h"
#include "constrain/matcher.h"

namespace specserve::constrain {

class TokenVocabulary {
 public:
  // Every id's bytes (Tokenizer::TokenBytes); ids with no bytes (control
  // tokens) are never in the trie, so only the end-of-sequence rule allows them.
  static std::shared_ptr<const TokenVocabulary> FromTokenizer(const Tokenizer& tok);
  // The same from explicit per-id bytes (tests).
  static std::shared_ptr<const TokenVocabulary> FromBytes(std::vector<std::string> token_bytes);

  int32_t vocab_size() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[id]; }

  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // (byte, node), by byte
    std::vector<int32_t> tokens;                         // ids whose bytes end here
  };
  const std::vector<Node>& trie() const { return trie_; }  // node 0 is the root

 private:
  std::vector<std::string> bytes_;
  std::vector<Node> trie_;
};

// A bitset over the vocabulary: bit t of word t / 64 is set when t is allowed.
using TokenMask = std::vector<uint64_t>;

// Masks by matcher state (GrammarMatcher::StateKey), least recently used
// evicted past `capacity` entries.
class MaskCache {
 public:
  explicit MaskCache(size_t capacity = 4096) : capacity_(capacity) {}
  std::shared_ptr<const TokenMask> Find(const std::vector<int32_t>& key);
  void Insert(const std::vector<int32_t>& key, std::shared_ptr<const TokenMask> mask);
  size_t size();

 private:
  using Entry = std::pair<std::vector<int32_t>, std::shared_ptr<const TokenMask>>;
  const size_t capacity_;
  absl::Mutex mu_;
  std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);  // most recent first
  absl::flat_hash_map<std::vector<int32_t>, std::list<Entry>::iterator> index_ ABSL_GUARDED_BY(mu_);
};

// The grammar's mask over the vocabulary for `m`'s state, without the
// end-of-sequence rule and without the cache: one trie walk.
TokenMask ComputeMask(const GrammarMatcher& m, const TokenVocabulary& vocab);

// One followed token sequence under a grammar. Copyable: a copy is a fork.
class TokenMatcher {
 public:
  // `cache` may be null (no caching); share one cache among the matchers of
  // one grammar and vocabulary.
  TokenMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab,
               std::vector<int32_t> eos_ids, std::shared_ptr<MaskCache> cache);

  // The allowed tokens now: grammar tokens, plus the eos ids exactly when the
  // document is complete. After an eos was accepted only eos ids stay allowed.
  std::shared_ptr<const TokenMask> Mask();
  void FillMask(std::vector<uint64_t>* bits);
  // logits[t] = -inf for every t in [0, vocab) not allowed; ids at or past
  // the vocabulary's size are forbidden.
  void Apply(float* logits, int32_t vocab);
  bool IsAllowed(int32_t token);
  // Moves past `token`; INVALID_ARGUMENT (state unchanged) if not allowed.
  absl::Status Accept(int32_t token);

  bool IsComplete() const { return matcher_.IsComplete(); }
  bool finished() const { return finished_; }  // an eos id was accepted
  const GrammarMatcher& matcher() const { return matcher_; }
  const TokenVocabulary& vocab() const { return *vocab_; }

 private:
  bool IsEos(int32_t token) const;

  GrammarMatcher matcher_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::vector<int32_t> eos_ids_;
  std::shared_ptr<MaskCache> cache_;
  bool finished_ = false;
};

}  // namespace specserve::constrain
