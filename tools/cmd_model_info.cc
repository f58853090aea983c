// `specserve inspect` and `specserve tokenize`.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "absl/strings/str_format.h"
#include "common/cli_args.h"
#include "common/tokenizer.h"
#include "common/weights.h"
#include "tools/commands.h"

namespace specserve::cli {
namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "specserve: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int Inspect(int argc, char** argv) {
  CliArgs args("usage: specserve inspect --model M.gguf");
  args.Flag("model", "", "GGUF file to describe");
  if (auto s = args.Parse(argc, argv, 2); !s.ok()) return Fail(s);
  if (args.help()) return std::puts(args.HelpText().c_str()), 0;
  auto file = GgufFile::Open(args.Str("model"));
  if (!file.ok()) return Fail(file.status());
  const GgufFile& f = **file;
  std::printf("file: %s\nGGUF version %u, %zu metadata keys, %zu tensors, alignment %u\n\n",
              f.path().c_str(), f.version(), f.keys().size(), f.tensors().size(), f.alignment());
  for (const std::string& k : f.keys()) {
    std::printf("  %-44s %s\n", k.c_str(), GgufFile::Describe(*f.Find(k)).c_str());
  }
  std::printf("\n  %-32s %-6s %s\n", "tensor", "type", "shape (ne0, ne1, ...)");
  int64_t params = 0;
  absl::flat_hash_map<std::string, int64_t> by_type;
  for (const GgufTensor& t : f.tensors()) {
    std::string shape = absl::StrFormat("%d", t.ne[0]);
    for (int d = 1; d < t.n_dims; ++d) shape += absl::StrFormat(" x %d", t.ne[d]);
    std::printf("  %-32s %-6s %s\n", t.name.c_str(), std::string(GgmlTypeName(t.type)).c_str(), shape.c_str());
    params += t.nelements();
    by_type[std::string(GgmlTypeName(t.type))] += t.nelements();
  }
  std::printf("\nparameters: %lld (%.2f M)\n", static_cast<long long>(params), params / 1e6);
  std::printf("weights by type:");
  for (const auto& [type, n] : by_type) std::printf("  %s %.1f%%", type.c_str(), 100.0 * n / params);
  std::printf("\n");
  auto config = ModelConfig::FromGguf(f);
  if (!config.ok()) return Fail(config.status());
  std::printf("architecture: %s, d=%d, layers=%d, heads=%d/%d, ffn=%d, vocab=%d, context=%d\n",
              config->arch.c_str(), config->n_embd, config->n_layer, config->n_head,
              config->n_head_kv, config->n_ff, config->vocab, config->n_ctx);
  auto tok = Tokenizer::FromGguf(f);
  if (!tok.ok()) return Fail(tok.status());
  std::printf("tokenizer: %s, %d tokens\n", std::string((*tok)->model_name()).c_str(), (*tok)->vocab_size());
  auto weights = BindWeights(f, *config);
  if (!weights.ok()) return Fail(weights.status());
  return 0;
}

int Tokenize(int argc, char** argv) {
  CliArgs args("usage: specserve tokenize --model M.gguf < text");
  args.Flag("model", "", "GGUF file whose tokenizer to use");
  args.BoolFlag("no-bos", "do not prepend BOS");
  if (auto s = args.Parse(argc, argv, 2); !s.ok()) return Fail(s);
  if (args.help()) return std::puts(args.HelpText().c_str()), 0;
  auto file = GgufFile::Open(args.Str("model"));
  if (!file.ok()) return Fail(file.status());
  auto tok = Tokenizer::FromGguf(**file);
  if (!tok.ok()) return Fail(tok.status());
  std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  const auto ids = (*tok)->Encode(text, !args.Bool("no-bos"));
  for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
  std::printf("\n");
  return 0;
}

}  // namespace specserve::cli
