// What the `specserve` subcommands share around their flags: parsing argv,
// answering --help and reporting a failed run; the prompt flag of the
// commands that take one prompt; and the sampling flags.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cli_args.h"
#include "spec/sampling.h"

namespace specserve::cli {

// How a command reports what went wrong with its flags and prints --help.
// The defaults are most commands'; the others keep what they always printed.
struct CommandStyle {
  // A flag error reads "specserve NAME: ERROR" (else just "ERROR").
  bool name_in_flag_errors = true;
  // --help ends with a blank line (puts), else right after the last flag.
  bool blank_line_after_help = true;
};

// Parses argv[2..] into ARGS (whose flags the command has declared). The exit
// code when the command is done already, having reported on stderr or stdout:
// 2 after a flag error, 0 after --help; nullopt when it should go on.
std::optional<int> ParseCommandFlags(CliArgs& args, int argc, char** argv, const std::string& name,
                                     const CommandStyle& style = {});

// ParseCommandFlags, then RUN: exit code 0, or 1 with "specserve NAME:
// STATUS" on stderr.
int RunCommand(CliArgs& args, int argc, char** argv, const std::string& name, absl::Status (*run)(const CliArgs&),
               const CommandStyle& style = {});

// --prompt, and the prompt it gives: the flag's text, else all of stdin.
void AddPromptFlag(CliArgs& args);
std::string PromptFromFlags(const CliArgs& args);

// --temperature, --top-k, --top-p and --seed, and the SamplingParams they
// give (in range for each flag, not yet Validate()d as a whole).
void AddSamplingFlags(CliArgs& args);
absl::StatusOr<SamplingParams> SamplingFromFlags(const CliArgs& args);

}  // namespace specserve::cli
