// libFuzzer target: common/gguf.h on arbitrary bytes, then everything that
// reads a model file's metadata and tensors on load: the typed getters, the
// tokenizer (Tokenizer::FromGguf), ModelConfig::FromGguf and BindWeights, and
// DequantizeRow over the first and last rows of every bound matrix.
//
// GgufFile has only a file API (Open maps a path), so each input is written
// to one memfd, reopened through /proc/self/fd: no disk I/O per input.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/model_config.h"
#include "common/tensor_types.h"
#include "common/tokenizer.h"
#include "common/weights.h"
#include "fuzz/fuzz_common.h"

namespace specserve {
namespace {

// Reads one byte the way the engine would, so ASan or the MMU sees a view
// that points outside the mapping.
uint8_t Touch(const uint8_t* p) { return *static_cast<const volatile uint8_t*>(p); }

void CheckTensors(const GgufFile& f) {
  for (const GgufTensor& t : f.tensors()) {
    FUZZ_CHECK(f.FindTensor(t.name) == &t, "FindTensor(\"%s\") is another tensor", t.name.c_str());
    FUZZ_CHECK(t.n_dims >= 1 && t.n_dims <= 4, "n_dims %d", t.n_dims);
    for (int64_t ne : t.ne) FUZZ_CHECK(ne >= 1, "ne %lld", static_cast<long long>(ne));
    FUZZ_CHECK(t.nelements() >= 1);
    FUZZ_CHECK(t.nbytes <= f.file_size() && t.offset <= f.file_size(), "tensor %s: %llu bytes at %llu",
               t.name.c_str(), static_cast<unsigned long long>(t.nbytes),
               static_cast<unsigned long long>(t.offset));
    FUZZ_CHECK(t.row_bytes() * static_cast<uint64_t>(t.nrows()) == t.nbytes, "tensor %s: rows x row bytes != nbytes",
               t.name.c_str());
    FUZZ_CHECK(t.offset % f.alignment() == 0);
    if (t.nbytes > 0) {
      FUZZ_CHECK(t.data != nullptr);
      Touch(t.data);
      Touch(t.data + t.nbytes - 1);
    }
  }
}

void CheckMetadata(const GgufFile& f) {
  FUZZ_CHECK(f.version() == 2 || f.version() == 3, "version %u", f.version());
  FUZZ_CHECK(f.alignment() != 0 && (f.alignment() & (f.alignment() - 1)) == 0, "alignment %u", f.alignment());
  static constexpr GgufValueType kElemTypes[] = {
      GgufValueType::kUint8,  GgufValueType::kInt8,    GgufValueType::kUint16, GgufValueType::kInt16,
      GgufValueType::kUint32, GgufValueType::kInt32,   GgufValueType::kFloat32, GgufValueType::kBool,
      GgufValueType::kString, GgufValueType::kUint64,  GgufValueType::kInt64,  GgufValueType::kFloat64};
  for (const std::string& key : f.keys()) {
    const GgufValue* v = f.Find(key);
    FUZZ_CHECK(v != nullptr && f.Has(key), "key \"%s\" listed but not found", key.c_str());
    (void)GgufFile::Describe(*v);
    (void)GgufValueTypeName(v->type);
    (void)f.GetString(key);
    (void)f.GetInt(key);
    (void)f.GetFloat(key);
    (void)f.GetBool(key);
    (void)f.GetIntOr(key, 7);
    (void)f.GetFloatOr(key, 0.5);
    (void)f.GetBoolOr(key, true);
    for (GgufValueType t : kElemTypes) {
      auto a = f.GetArray(key, t);
      if (a.ok()) (void)(*a)->size();
    }
  }
}

void CheckTokenizer(const GgufFile& f) {
  auto tok = Tokenizer::FromGguf(f);
  if (!tok.ok()) return;
  const Tokenizer& t = **tok;
  const int32_t vocab = t.vocab_size();
  FUZZ_CHECK(vocab > 0);
  FUZZ_CHECK(t.bos() >= 0 && t.bos() < vocab && t.eos() >= 0 && t.eos() < vocab, "bos %d eos %d vocab %d",
             t.bos(), t.eos(), vocab);
  for (TokenId id = 0; id < vocab; ++id) {
    (void)t.TokenBytes(id);
    (void)t.piece(id);
    (void)t.type(id);
  }
  for (const char* text : {"def f(x):\n    return x  # \xC3\xA9\xE2\x86\x92", " \t\r\n<s></s>", "\xFF\xC3"}) {
    const std::vector<TokenId> ids = t.Encode(text, true);
    for (TokenId id : ids) FUZZ_CHECK(id >= 0 && id < vocab, "id %d outside [0, %d)", id, vocab);
    (void)t.Decode(ids);
    Detokenizer d(t);
    for (TokenId id : ids) (void)d.Push(id);
    (void)d.Flush();
  }
  FUZZ_CHECK(CheckSameVocabulary(t, t).ok());
}

void DequantizeEnds(const MatrixView& m, std::vector<float>& row) {
  if (m.data == nullptr || m.rows <= 0) return;
  row.resize(static_cast<size_t>(m.cols));
  DequantizeRow(m.type, m.row(0), row.data(), m.cols);
  DequantizeRow(m.type, m.row(m.rows - 1), row.data(), m.cols);
}

void CheckModel(const GgufFile& f) {
  auto config = ModelConfig::FromGguf(f);
  if (!config.ok()) return;
  const ModelConfig& c = *config;
  FUZZ_CHECK(c.vocab > 0 && c.n_embd > 0 && c.n_layer > 0 && c.n_head > 0 && c.n_head_kv > 0 && c.n_ctx > 0);
  FUZZ_CHECK(c.n_head % c.n_head_kv == 0 && c.head_dim > 0 && c.rope_dim <= c.head_dim);
  auto w = BindWeights(f, c);
  if (!w.ok()) return;
  FUZZ_CHECK(static_cast<int32_t>(w->layers.size()) == c.n_layer);
  std::vector<float> row;
  DequantizeEnds(w->tok_embd, row);
  DequantizeEnds(w->output, row);
  for (const LayerWeights& l : w->layers) {
    for (const MatrixView* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down}) DequantizeEnds(*m, row);
  }
}

}  // namespace
}  // namespace specserve

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace specserve;
  static const int fd = [] {
    const int fd = ::memfd_create("fuzz_gguf", MFD_CLOEXEC);
    FUZZ_CHECK(fd >= 0, "memfd_create failed");
    return fd;
  }();
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  FUZZ_CHECK(::ftruncate(fd, 0) == 0);
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    FUZZ_CHECK(n > 0, "pwrite to the memfd failed");
    done += static_cast<size_t>(n);
  }
  auto f = GgufFile::Open(path);
  if (!f.ok()) return 0;
  FUZZ_CHECK((*f)->file_size() == size, "file_size %llu for %zu bytes",
             static_cast<unsigned long long>((*f)->file_size()), size);
  CheckMetadata(**f);
  CheckTensors(**f);
  CheckTokenizer(**f);
  CheckModel(**f);
  return 0;
}
