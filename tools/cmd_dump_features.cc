// `specserve dump-features`: runs a target over a text corpus and writes,
// for every position, its token and the target's feature there (the last
// layer's residual stream before the final RMSNorm, Backend::ForwardFeatures)
// for the EAGLE head's training script (tools/train_eagle.py).
//
// The corpus is a list of text files (one path a line). Each file is
// tokenized with the target's tokenizer (BOS first) and cut into sequences of
// at most --chunk tokens; each sequence runs from an empty cache. Files are
// taken in list order until --max-tokens tokens are in.
//
// File layout (little-endian):
//   char magic[8] = "SSFEAT1\0"
//   u32 n_embd | u32 vocab | u64 n_seqs | u64 n_tokens
//   u64 seq_start[n_seqs + 1]          token index where each sequence starts
//   i32 tokens[n_tokens]
//   f16 features[n_tokens][n_embd]     feature of the position holding tokens[t]
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/make_backend.h"
#include "common/backend.h"
#include "common/cli_args.h"
#include "common/fp16.h"
#include "common/gguf_writer.h"
#include "common/status_macros.h"
#include "common/tokenizer.h"
#include "common/weights.h"
#include "tools/command_flags.h"
#include "tools/commands.h"

namespace specserve::cli {
namespace {

// The corpus's sequences: every file's tokens in chunks of at most `chunk`.
absl::StatusOr<std::vector<std::vector<TokenId>>> CorpusSequences(const std::string& list, const Tokenizer& tok,
                                                                  int64_t chunk, int64_t max_tokens) {
  std::ifstream in(list);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open the file list ", list));
  std::vector<std::vector<TokenId>> seqs;
  int64_t total = 0;
  std::string path;
  while (total < max_tokens && std::getline(in, path)) {
    if (path.empty()) continue;
    std::ifstream f(path, std::ios::binary);
    if (!f) return absl::NotFoundError(absl::StrCat("cannot open corpus file ", path));
    std::stringstream text;
    text << f.rdbuf();
    const std::vector<TokenId> ids = tok.Encode(text.str(), /*add_bos=*/true);
    for (size_t at = 0; at < ids.size() && total < max_tokens; at += chunk) {
      const int64_t n = std::min<int64_t>({chunk, static_cast<int64_t>(ids.size() - at), max_tokens - total});
      if (n < 2) break;  // a position needs a successor to train on
      seqs.emplace_back(ids.begin() + at, ids.begin() + at + n);
      total += n;
    }
  }
  if (seqs.empty()) return absl::InvalidArgumentError(absl::StrCat("the file list ", list, " gave no tokens"));
  return seqs;
}

absl::Status Run(const CliArgs& args) {
  ASSIGN_OR_RETURN(const int64_t chunk, args.Int("chunk", 2, 1 << 20));
  ASSIGN_OR_RETURN(const int64_t max_tokens, args.Int("max-tokens", 2, int64_t{1} << 34));
  ASSIGN_OR_RETURN(const int64_t threads, args.Int("threads", 1, 256));
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load(args.Str("target")));
  const ModelConfig& c = model->config;
  if (chunk > c.n_ctx) {
    return absl::InvalidArgumentError(absl::StrCat("--chunk ", chunk, " exceeds the target's context ", c.n_ctx));
  }
  ASSIGN_OR_RETURN(auto tok, Tokenizer::FromGguf(*model->file));
  ASSIGN_OR_RETURN(const auto seqs, CorpusSequences(args.Str("files"), *tok, chunk, max_tokens));
  BackendOptions bo;
  bo.threads = static_cast<int>(threads);
  bo.kv_contexts = 1;
  ASSIGN_OR_RETURN(bo.cpu_activations, ParseMatMulActivations(args.Str("cpu-activations")));
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, MakeCpuBackend(*model, bo));

  ByteWriter header;
  header.Raw(std::string("SSFEAT1\0", 8)).U32(c.n_embd).U32(c.vocab).U64(seqs.size());
  uint64_t n_tokens = 0;
  for (const auto& s : seqs) n_tokens += s.size();
  header.U64(n_tokens);
  uint64_t start = 0;
  for (const auto& s : seqs) header.U64(start), start += s.size();
  header.U64(start);
  for (const auto& s : seqs) {
    for (TokenId id : s) header.I32(id);
  }
  const std::string out_path = args.Str("out");
  std::FILE* out = std::fopen(out_path.c_str(), "wb");
  if (out == nullptr) return absl::PermissionDeniedError(absl::StrCat("cannot create ", out_path));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(out, &std::fclose);
  if (std::fwrite(header.bytes().data(), 1, header.size(), out) != header.size()) {
    return absl::DataLossError(absl::StrCat("short write to ", out_path));
  }
  std::vector<float> logits, features;
  std::vector<uint16_t> half;
  for (size_t i = 0; i < seqs.size(); ++i) {
    KvSeq kv;
    const ForwardSeq pass{&kv, seqs[i], static_cast<int32_t>(seqs[i].size())};
    absl::Status s = backend->ForwardFeatures({pass}, &logits, &features);
    backend->kv_pool().Release(kv);
    RETURN_IF_ERROR(s);
    half.resize(features.size());
    for (size_t j = 0; j < features.size(); ++j) half[j] = F32ToF16(features[j]);
    if (std::fwrite(half.data(), sizeof(uint16_t), half.size(), out) != half.size()) {
      return absl::DataLossError(absl::StrCat("short write to ", out_path));
    }
  }
  if (std::fclose(closer.release()) != 0) return absl::DataLossError(absl::StrCat("cannot close ", out_path));
  std::printf("%s: %zu sequences, %llu tokens, features [%llu, %d] f16\n", out_path.c_str(), seqs.size(),
              static_cast<unsigned long long>(n_tokens), static_cast<unsigned long long>(n_tokens), c.n_embd);
  return absl::OkStatus();
}

}  // namespace

int DumpFeatures(int argc, char** argv) {
  CliArgs args("usage: specserve dump-features --target T.gguf --files LIST --out FEATURES.bin [flags]");
  args.Flag("target", "models/code-target-7m.gguf", "target model whose features to dump");
  args.Flag("files", "", "text file listing the corpus files, one path a line");
  args.Flag("out", "", "output file (layout in tools/cmd_dump_features.cc)");
  args.Flag("chunk", "512", "tokens per sequence at most (each from an empty cache)");
  args.Flag("max-tokens", "400000", "stop after this many tokens");
  args.Flag("threads", "1", "CPU threads");
  args.Flag("cpu-activations", "int8", "fp32 or int8 CPU matrix products (common/matmul_activations.h)");
  return RunCommand(args, argc, argv, "dump-features", Run);
}

}  // namespace specserve::cli
