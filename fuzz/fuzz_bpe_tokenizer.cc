// libFuzzer target: the byte-level BPE tokenizer (Llama 3 pre-tokenizer) of
// the bundled models/code-bpe-4m.gguf (built once), on arbitrary bytes as
// text. Checks (fuzz/tokenizer_checks.h): ids in range, BOS, no control token
// from text, Decode(Encode(x)) == x for any bytes, and the streaming
// Detokenizer agreeing with Decode.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_common.h"
#include "fuzz/tokenizer_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace specserve;
  static const Tokenizer* const tok = fuzz::LoadTokenizer("code-bpe-4m.gguf", "gpt2").release();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  fuzz::CheckEncodeDecode(*tok, text, std::string(text));
  return 0;
}
