// Committed token ids -> the text a client may see, with stop strings.
//
// Text is decoded incrementally (a Detokenizer holds split UTF-8). With stop
// strings, a tail of text that could still become a stop string is held
// back, and token ids are released together with their text, so each
// release is a consistent (ids, text) pair. At the earliest occurrence of a
// stop string the generation ends: the text before it is released, the stop
// string and everything after are not, and neither is the id of the token in
// which the stop string starts.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "common/tokenizer.h"

namespace specserve {

class TextStream {
 public:
  // The prompt is decoded and dropped, so the continuation's text is what
  // follows it (its first space is kept, unlike at the start of a text).
  TextStream(const Tokenizer& tok, absl::Span<const TokenId> prompt, std::vector<std::string> stops);

  struct Release {
    std::string text;
    std::vector<TokenId> ids;
    bool stopped = false;  // a stop string was found: the generation is over
  };
  // Adds committed ids; returns what is safe to show now.
  Release Push(absl::Span<const TokenId> ids);
  // The generation ended without a stop string: releases everything held.
  Release Finish();

 private:
  // Length of the longest suffix of text_[from..] that is a proper prefix of a stop string.
  size_t HeldTail(size_t from) const;
  Release Take(size_t text_end, bool stopped);

  Detokenizer detok_;
  std::vector<std::string> stops_;
  std::string text_;                // everything decoded so far
  size_t sent_ = 0;                 // text_[0, sent_) is released
  std::vector<TokenId> held_ids_;   // committed ids not yet released
  std::vector<size_t> held_ends_;   // text_ length after each held id
  bool stopped_ = false;
};

}  // namespace specserve
