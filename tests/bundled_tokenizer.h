// The tokenizer of the bundled target model (models/code-target-7m.gguf), for
// the tests that need real token ids: the proto conversions and the text
// stream.
#pragma once
#include <memory>
#include <utility>

#include <gtest/gtest.h>

#include "common/tokenizer.h"
#include "common/weights.h"
#include "tests/test_paths.h"

namespace specserve::testing {

inline std::unique_ptr<Tokenizer> BundledTokenizer() {
  auto model = Model::Load(BundledModel("code-target-7m.gguf"));
  EXPECT_TRUE(model.ok()) << model.status();
  auto tok = Tokenizer::FromGguf(*(*model)->file);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return std::move(*tok);
}

}  // namespace specserve::testing
