// The coordinator's text stream (coordinator/text_stream.h): detokenized
// text in order, stop strings, and text held back while it could still start
// one.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/text_stream.h"
#include "tests/bundled_tokenizer.h"

namespace specserve {
namespace {

using testing::BundledTokenizer;

// Pushes `ids` one at a time; returns the concatenated releases.
TextStream::Release PushAll(TextStream& ts, const std::vector<TokenId>& ids) {
  TextStream::Release all;
  for (TokenId id : ids) {
    TextStream::Release r = ts.Push({id});
    all.text += r.text;
    all.ids.insert(all.ids.end(), r.ids.begin(), r.ids.end());
    all.stopped = all.stopped || r.stopped;
  }
  return all;
}

TEST(TextStreamTest, WithoutStopsEverythingGoesOutInOrder) {
  auto tok = BundledTokenizer();
  const std::vector<TokenId> prompt = tok->Encode("def f(x):", true);
  const std::vector<TokenId> cont = tok->Encode("def f(x):\n    return x * 2\n", true);
  const std::vector<TokenId> gen(cont.begin() + prompt.size(), cont.end());
  TextStream ts(*tok, prompt, {});
  TextStream::Release r = PushAll(ts, gen);
  TextStream::Release end = ts.Finish();
  EXPECT_EQ(r.ids, gen);
  EXPECT_EQ(r.text + end.text, tok->Decode(cont).substr(tok->Decode(prompt).size()));
  EXPECT_FALSE(r.stopped);
}

TEST(TextStreamTest, StopsAtTheEarliestStopStringAndHoldsPossibleStarts) {
  auto tok = BundledTokenizer();
  const std::vector<TokenId> prompt = tok->Encode("x = 1", true);
  const std::vector<TokenId> cont = tok->Encode("x = 1\ny = 2\nreturn x + y\n", true);
  const std::vector<TokenId> gen(cont.begin() + prompt.size(), cont.end());
  const std::string text = tok->Decode(cont).substr(tok->Decode(prompt).size());
  const size_t at = text.find("return");
  ASSERT_NE(at, std::string::npos);

  TextStream ts(*tok, prompt, {"+ y", "return", "never"});
  TextStream::Release r = PushAll(ts, gen);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, text.substr(0, at));  // "return" comes before "+ y"
  EXPECT_TRUE(std::equal(r.ids.begin(), r.ids.end(), gen.begin()));
  EXPECT_LE(tok->Decode(r.ids).size(), at + 1);
  EXPECT_TRUE(ts.Push({gen[0]}).stopped);  // nothing more after a stop
  EXPECT_TRUE(ts.Push({gen[0]}).ids.empty());

  // A tail that could start a stop string waits until it cannot.
  TextStream held(*tok, prompt, {"\ny = 3"});
  TextStream::Release part = PushAll(held, gen);
  TextStream::Release rest = held.Finish();
  EXPECT_FALSE(part.stopped);
  EXPECT_EQ(part.text + rest.text, text);
  std::vector<TokenId> ids = part.ids;
  ids.insert(ids.end(), rest.ids.begin(), rest.ids.end());
  EXPECT_EQ(ids, gen);
}

}  // namespace
}  // namespace specserve
