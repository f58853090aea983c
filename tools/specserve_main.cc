// `specserve`: run and inspect models locally, no services needed.
#include <cstdio>
#include <cstring>
#include <string>

#include "tools/commands.h"

namespace {

constexpr char kUsage[] =
    "usage: specserve COMMAND [flags]   (specserve COMMAND --help for its flags)\n"
    "\n"
    "commands:\n"
    "  generate    generate text from a prompt, optionally with speculative decoding\n"
    "  tokenize    print the token ids of the text on stdin\n"
    "  inspect     print a GGUF file's metadata, tensors and parameter count\n"
    "  bench       prefill and decode speed of the bundled models\n"
    "  spec-bench  speculative decoding figures over a prompt file\n"
    "  client      stream one request from a running coordinator\n"
    "  serve-bench the three-process deployment against plain and in-process decoding\n"
    "  inflate     widen a small model to a real model's shapes and write it as GGUF\n"
    "  dump-features  the target's features over a corpus, for training an EAGLE head\n"
    "  eagle-bench    greedy self-speculation with an EAGLE head against plain decoding\n"
    "  constrain-bench  structured output's cost through the services, against free output\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  if (cmd == "generate") return specserve::cli::Generate(argc, argv);
  if (cmd == "tokenize") return specserve::cli::Tokenize(argc, argv);
  if (cmd == "inspect") return specserve::cli::Inspect(argc, argv);
  if (cmd == "bench") return specserve::cli::Bench(argc, argv);
  if (cmd == "spec-bench") return specserve::cli::SpecBench(argc, argv);
  if (cmd == "client") return specserve::cli::Client(argc, argv);
  if (cmd == "serve-bench") return specserve::cli::ServeBench(argc, argv);
  if (cmd == "inflate") return specserve::cli::Inflate(argc, argv);
  if (cmd == "dump-features") return specserve::cli::DumpFeatures(argc, argv);
  if (cmd == "eagle-bench") return specserve::cli::EagleBench(argc, argv);
  if (cmd == "constrain-bench") return specserve::cli::ConstrainBench(argc, argv);
  std::fprintf(stderr, "specserve: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
  return 2;
}
