#include "coordinator/text_stream.h"

#include <algorithm>

namespace specserve {

TextStream::TextStream(const Tokenizer& tok, absl::Span<const TokenId> prompt, std::vector<std::string> stops)
    : detok_(tok) {
  for (TokenId id : prompt) detok_.Push(id);
  for (std::string& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

size_t TextStream::HeldTail(size_t from) const {
  size_t held = 0;
  for (const std::string& stop : stops_) {
    const size_t max_len = std::min(stop.size() - 1, text_.size() - from);
    for (size_t len = max_len; len > held; --len) {
      if (text_.compare(text_.size() - len, len, stop, 0, len) == 0) {
        held = len;
        break;
      }
    }
  }
  return held;
}

TextStream::Release TextStream::Take(size_t text_end, bool stopped) {
  Release r;
  r.stopped = stopped;
  // Ids whose text ends within [0, text_end) go out.
  size_t n = 0;
  while (n < held_ids_.size() && held_ends_[n] <= text_end) ++n;
  // Without a stop, text goes out with its ids (a token partly inside the
  // held tail waits whole); at a stop, all text before the stop string goes.
  if (!stopped) text_end = n > 0 ? held_ends_[n - 1] : sent_;
  r.ids.assign(held_ids_.begin(), held_ids_.begin() + n);
  held_ids_.erase(held_ids_.begin(), held_ids_.begin() + n);
  held_ends_.erase(held_ends_.begin(), held_ends_.begin() + n);
  if (text_end > sent_) {
    r.text = text_.substr(sent_, text_end - sent_);
    sent_ = text_end;
  }
  return r;
}

TextStream::Release TextStream::Push(absl::Span<const TokenId> ids) {
  if (stopped_) return Release{{}, {}, true};
  for (TokenId id : ids) {
    text_ += detok_.Push(id);
    held_ids_.push_back(id);
    held_ends_.push_back(text_.size());
  }
  if (stops_.empty()) return Take(text_.size(), false);
  // Any stop string starts at or after sent_: text before sent_ was released
  // only because no stop string could start there.
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) first = std::min(first, text_.find(stop, sent_));
  if (first != std::string::npos) {
    stopped_ = true;
    return Take(first, true);
  }
  return Take(text_.size() - HeldTail(sent_), false);
}

TextStream::Release TextStream::Finish() {
  if (stopped_) return Release{{}, {}, true};
  text_ += detok_.Flush();
  Release r = Take(text_.size(), false);
  r.text += text_.substr(sent_);  // flushed bytes that no held id accounts for
  sent_ = text_.size();
  return r;
}

}  // namespace specserve
