// `specserve inflate`: a small model widened to a real model's matrix shapes
// (tools/inflate.h), written as a GGUF file (tools/inflate_gguf.h).
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/cli_args.h"
#include "common/status_macros.h"
#include "common/weights.h"
#include "tools/command_flags.h"
#include "tools/commands.h"
#include "tools/inflate.h"
#include "tools/inflate_gguf.h"
#include "tools/inflate_shape.h"

namespace specserve::cli {
namespace {

absl::Status Run(const CliArgs& args) {
  if (args.Str("model").empty() || args.Str("out").empty()) {
    return absl::InvalidArgumentError("--model and --out are required");
  }
  // The flags are checked before the model is read: a typo fails at once.
  ASSIGN_OR_RETURN(const inflate::FileType type, inflate::ParseFileType(args.Str("type")));
  ASSIGN_OR_RETURN(const int64_t seed, args.Int("seed", 0, INT64_MAX));
  ASSIGN_OR_RETURN(const int64_t threads, args.Int("threads", 0, 1024));
  const auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::unique_ptr<Model> small, Model::Load(args.Str("model")));
  ASSIGN_OR_RETURN(const inflate::Shape shape, inflate::ParseShape(args.Str("shape"), small->config));
  ASSIGN_OR_RETURN(std::unique_ptr<inflate::Inflated> big,
                   inflate::Inflate(*small, shape, static_cast<uint64_t>(seed)));
  const int n_threads = threads > 0 ? static_cast<int>(threads) : static_cast<int>(std::thread::hardware_concurrency());
  RETURN_IF_ERROR(inflate::WriteInflatedGguf(*small->file, *big, type, args.Str("out"), n_threads));
  const ModelConfig& c = big->model.config;
  int64_t params = 0;
  for (const inflate::FileTensor& t : inflate::FileTensors(*big, type)) {
    params += t.vec ? t.n : t.matrix.rows * t.matrix.cols;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s: d=%d layers=%d heads=%d/%d head_dim=%d ffn=%d, %.1f M parameters, %s, %.1f s\n",
              args.Str("out").c_str(), c.n_embd, c.n_layer, c.n_head, c.n_head_kv, c.head_dim, c.n_ff,
              params / 1e6, std::string(inflate::Info(type).flag).c_str(), s);
  return absl::OkStatus();
}

}  // namespace

int Inflate(int argc, char** argv) {
  CliArgs args(
      "usage: specserve inflate --model SMALL.gguf --shape NAME|D,L,H,HKV,FF --type f16|q8_0|q4_k_m --out BIG.gguf\n"
      "Widens a Llama model to a bigger shape computing the same function (tools/inflate.h) and writes it as GGUF.");
  args.Flag("model", "", "the small GGUF model");
  args.Flag("shape", "llama-1b",
            std::string("a named shape (") + inflate::kShapeNames +
                ") or n_embd,layers,heads,kv_heads,ffn (n_embd a power of two)");
  args.Flag("type", "f16", "f16, q8_0 or q4_k_m (llama.cpp's mix: Q4_K, Q6_K for output and some attn_v/ffn_down)");
  args.Flag("out", "", "the GGUF file to write");
  args.Flag("seed", "1", "seed of the rotation and of the filler weights");
  args.Flag("threads", "0", "threads quantizing (0: all cores)");
  return RunCommand(args, argc, argv, "inflate", Run);
}

}  // namespace specserve::cli
