#include "tools/command_flags.h"

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <iterator>

#include "common/status_macros.h"

namespace specserve::cli {

std::optional<int> ParseCommandFlags(CliArgs& args, int argc, char** argv, const std::string& name,
                                     const CommandStyle& style) {
  if (absl::Status s = args.Parse(argc, argv, 2); !s.ok()) {
    if (style.name_in_flag_errors) std::fprintf(stderr, "specserve %s: ", name.c_str());
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 2;
  }
  if (args.help()) {
    std::fputs(args.HelpText().c_str(), stdout);
    if (style.blank_line_after_help) std::fputs("\n", stdout);
    return 0;
  }
  return std::nullopt;
}

int RunCommand(CliArgs& args, int argc, char** argv, const std::string& name, absl::Status (*run)(const CliArgs&),
               const CommandStyle& style) {
  if (std::optional<int> done = ParseCommandFlags(args, argc, argv, name, style)) return *done;
  if (absl::Status s = run(args); !s.ok()) {
    std::fprintf(stderr, "specserve %s: %s\n", name.c_str(), s.ToString().c_str());
    return 1;
  }
  return 0;
}

void AddPromptFlag(CliArgs& args) { args.Flag("prompt", "", "prompt text (read from stdin when absent)"); }

std::string PromptFromFlags(const CliArgs& args) {
  std::string prompt = args.Str("prompt");
  if (!args.Given("prompt")) {
    prompt.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  return prompt;
}

void AddSamplingFlags(CliArgs& args) {
  args.Flag("temperature", "0", "sampling temperature; 0 is greedy");
  args.Flag("top-k", "0", "keep the k most likely tokens (0: off)");
  args.Flag("top-p", "1", "nucleus sampling mass (1: off)");
  args.Flag("seed", "0", "random seed (same seed, same output)");
}

absl::StatusOr<SamplingParams> SamplingFromFlags(const CliArgs& args) {
  SamplingParams sp;
  ASSIGN_OR_RETURN(double temperature, args.Double("temperature", 0, 100));
  ASSIGN_OR_RETURN(sp.top_k, args.Int("top-k", 0, 1 << 30));
  ASSIGN_OR_RETURN(double top_p, args.Double("top-p", 0, 1));
  ASSIGN_OR_RETURN(int64_t seed, args.Int("seed", 0, INT64_MAX));
  sp.temperature = static_cast<float>(temperature);
  sp.top_p = static_cast<float>(top_p);
  sp.seed = static_cast<uint64_t>(seed);
  return sp;
}

}  // namespace specserve::cli
