// libFuzzer target: the SentencePiece tokenizer of the bundled
// models/code-target-7m.gguf (built once), on arbitrary bytes as text.
// Checks (fuzz/tokenizer_checks.h): ids in range, BOS, no control token from
// text, Decode(Encode(x)) == x with U+2581 read as a space, and the streaming
// Detokenizer agreeing with Decode.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_replace.h"
#include "fuzz/fuzz_common.h"
#include "fuzz/tokenizer_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace specserve;
  static const Tokenizer* const tok = fuzz::LoadTokenizer("code-target-7m.gguf", "llama").release();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // Spaces become "▁" before encoding, so a "▁" in the text decodes as a space.
  const std::string expected = absl::StrReplaceAll(absl::string_view(text.data(), text.size()),
                                                   {{"\xE2\x96\x81", " "}});
  fuzz::CheckEncodeDecode(*tok, text, expected);
  return 0;
}
