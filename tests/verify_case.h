// One Verify call's inputs, owned: the arrays a VerifyInput points to.
#pragma once

#include <cstdint>
#include <vector>

#include "spec/sampling.h"
#include "spec/verify.h"

namespace specserve::testing {

struct VerifyCase {
  std::vector<float> logits;  // [k + 1, vocab]
  int32_t vocab = 0;
  std::vector<int32_t> tokens;
  std::vector<SparseDist> dists;
  SamplingParams params;
  uint64_t first_position = 0;
  VerifyInput Input() const {
    return VerifyInput{logits.data(), vocab, static_cast<int32_t>(tokens.size()), tokens.data(), dists.data(),
                       params, first_position};
  }
};

}  // namespace specserve::testing
