// The EAGLE head (common/eagle_head.h) on the CPU, and greedy
// self-speculation with it over a target Backend.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/backend.h"
#include "common/eagle_head.h"
#include "common/thread_pool.h"
#include "common/weights.h"

namespace specserve {

// The head's keys and values of one sequence, positions [0, length):
// k, v [n_ctx, kv_dim] (rotated keys), grown as positions are appended.
struct EagleSeq {
  std::vector<float> k, v;
  int32_t length = 0;
};

class CpuEagleHead {
 public:
  // HEAD and TARGET (the model it was loaded for) must outlive this.
  CpuEagleHead(const EagleHead& head, const Model& target, ThreadPool& pool);

  // Appends n = tokens.size() positions at [seq.length, seq.length + n):
  // position i's input is concat(embed(tokens[i]), features[i]), tokens[i]
  // being the token after the one whose feature is features[i] ([n, n_embd]).
  // Writes h [n, n_embd], the predicted next features. INVALID_ARGUMENT for
  // a token outside the vocabulary or positions past the head's context.
  absl::Status Append(EagleSeq& seq, absl::Span<const TokenId> tokens, const float* features, std::vector<float>* h);
  // The target's readout of h [rows, n_embd]: logits [rows, vocab].
  void Readout(const float* h, int64_t rows, std::vector<float>* logits);
  void Truncate(EagleSeq& seq, int32_t length) const { seq.length = std::min(seq.length, length); }

  const EagleHeadConfig& config() const { return c_; }

 private:
  void Attend(const EagleSeq& seq, int64_t n);

  const EagleHeadConfig& c_;
  const EagleHeadWeights& w_;
  const Model& target_;
  ThreadPool& pool_;
  std::vector<float> in_, x_, xn_, q_, k_, v_, attn_, proj_, gate_, up_, cs_, scores_, hidden_;
  std::vector<int32_t> pos_;
};

// What a self-speculative greedy run did.
struct EagleRunStats {
  std::vector<TokenId> tokens;  // the generated tokens
  int64_t target_passes = 0;    // verify passes after the prefill (a round each)
  int64_t drafted = 0, accepted = 0;
  double decode_seconds = 0;    // after the prefill
};

// Greedy decoding of max_tokens new tokens after PROMPT on TARGET, drafting
// K tokens a round with HEAD from the target's own features (K = 0: plain
// greedy decoding, one token a pass). Each round the target verifies
// [pending, d1..dK] in one pass (Backend::ForwardFeatures), keeps the
// longest prefix its argmax agrees with plus its own next token, and the
// head catches up on the committed positions' real features. The output is
// the target's greedy output token for token.
absl::StatusOr<EagleRunStats> GreedySelfSpeculate(Backend& target, CpuEagleHead* head,
                                                  absl::Span<const TokenId> prompt, int32_t max_tokens, int32_t k);

}  // namespace specserve
