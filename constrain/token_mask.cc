#include "constrain/token_mask.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_format.h"

namespace specserve::constrain {

std::shared_ptr<const TokenVocabulary> TokenVocabulary::FromTokenizer(const Tokenizer& tok) {
  std::vector<std::string> bytes(tok.vocab_size());
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (tok.type(id) != TokenType::kControl) bytes[id] = tok.TokenBytes(id);
  }
  return FromBytes(std::move(bytes));
}

std::shared_ptr<const TokenVocabulary> TokenVocabulary::FromBytes(std::vector<std::string> token_bytes) {
  std::shared_ptr<TokenVocabulary> v(new TokenVocabulary());
  v->bytes_ = std::move(token_bytes);
  v->trie_.emplace_back();
  for (int32_t id = 0; id < v->vocab_size(); ++id) {
    const std::string& s = v->bytes_[id];
    if (s.empty()) continue;
    int32_t node = 0;
    for (const char ch : s) {
      const auto c = static_cast<uint8_t>(ch);
      auto& kids = v->trie_[node].children;
      auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(c, int32_t{-1}));
      if (it != kids.end() && it->first == c) {
        node = it->second;
        continue;
      }
      const int32_t child = static_cast<int32_t>(v->trie_.size());
      kids.insert(it, {c, child});  // `kids` is not used after trie_ grows
      v->trie_.emplace_back();
      node = child;
    }
    v->trie_[node].tokens.push_back(id);
  }
  return v;
}

std::shared_ptr<const TokenMask> MaskCache::Find(const std::vector<int32_t>& key) {
  absl::MutexLock lock(&mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void MaskCache::Insert(const std::vector<int32_t>& key, std::shared_ptr<const TokenMask> mask) {
  absl::MutexLock lock(&mu_);
  if (index_.contains(key)) return;
  lru_.emplace_front(key, std::move(mask));
  index_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

size_t MaskCache::size() {
  absl::MutexLock lock(&mu_);
  return lru_.size();
}

TokenMask ComputeMask(const GrammarMatcher& m, const TokenVocabulary& vocab) {
  TokenMask mask((vocab.vocab_size() + 63) / 64, 0);
  const auto& trie = vocab.trie();
  // Depth-first with one matcher per depth: frames[d] holds the state after
  // the d bytes of the current path.
  struct Frame {
    int32_t node;
    size_t next_child;
    GrammarMatcher m;
  };
  std::vector<Frame> frames;
  frames.push_back({0, 0, m});
  while (!frames.empty()) {
    Frame& f = frames.back();
    const auto& kids = trie[f.node].children;
    if (f.next_child >= kids.size() || !f.m.CanContinue()) {
      frames.pop_back();
      continue;
    }
    const auto [byte, child] = kids[f.next_child++];
    GrammarMatcher next = f.m;
    if (!next.AcceptByte(byte)) continue;
    for (const int32_t t : trie[child].tokens) mask[t / 64] |= uint64_t{1} << (t % 64);
    if (!trie[child].children.empty()) frames.push_back({child, 0, std::move(next)});
  }
  return mask;
}

TokenMatcher::TokenMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab,
                           std::vector<int32_t> eos_ids, std::shared_ptr<MaskCache> cache)
    : matcher_(std::move(grammar)), vocab_(std::move(vocab)), eos_ids_(std::move(eos_ids)), cache_(std::move(cache)) {}

bool TokenMatcher::IsEos(int32_t token) const {
  return std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end();
}

std::shared_ptr<const TokenMask> TokenMatcher::Mask() {
  std::vector<int32_t> key;
  if (finished_) {
    key = {-3};  // only eos
  } else {
    key = matcher_.StateKey();
  }
  if (cache_ != nullptr) {
    if (auto hit = cache_->Find(key)) return hit;
  }
  auto mask = std::make_shared<TokenMask>(finished_ ? TokenMask((vocab_->vocab_size() + 63) / 64, 0)
                                                    : ComputeMask(matcher_, *vocab_));
  if (finished_ || matcher_.IsComplete()) {
    for (const int32_t e : eos_ids_) {
      if (e >= 0 && e < vocab_->vocab_size()) (*mask)[e / 64] |= uint64_t{1} << (e % 64);
    }
  }
  if (cache_ != nullptr) cache_->Insert(key, mask);
  return mask;
}

void TokenMatcher::FillMask(std::vector<uint64_t>* bits) { *bits = *Mask(); }

void TokenMatcher::Apply(float* logits, int32_t vocab) {
  const auto mask = Mask();
  const int32_t n = vocab_->vocab_size();
  for (int32_t t = 0; t < vocab; ++t) {
    if (t >= n || ((*mask)[t / 64] >> (t % 64) & 1) == 0) logits[t] = -std::numeric_limits<float>::infinity();
  }
}

bool TokenMatcher::IsAllowed(int32_t token) {
  if (token < 0 || token >= vocab_->vocab_size()) return false;
  const auto mask = Mask();
  return ((*mask)[token / 64] >> (token % 64) & 1) != 0;
}

absl::Status TokenMatcher::Accept(int32_t token) {
  if (token < 0 || token >= vocab_->vocab_size())
    return absl::InvalidArgumentError(absl::StrFormat("token %d is outside the vocabulary", token));
  if (IsEos(token)) {
    if (!finished_ && !matcher_.IsComplete())
      return absl::InvalidArgumentError(absl::StrFormat("end of sequence (token %d) before the document is complete", token));
    finished_ = true;
    return absl::OkStatus();
  }
  if (finished_) return absl::InvalidArgumentError(absl::StrFormat("token %d after the end of sequence", token));
  const std::string& bytes = vocab_->bytes(token);
  if (bytes.empty() || !matcher_.AcceptBytes(bytes))
    return absl::InvalidArgumentError(absl::StrFormat("token %d is not allowed by the grammar here", token));
  return absl::OkStatus();
}

}  // namespace specserve::constrain
