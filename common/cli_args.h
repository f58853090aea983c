// A small command-line parser shared by every binary: `--name value`,
// `--name=value` and boolean `--name`. Each binary declares its flags with a
// help line, so `--help` documents them all and a typo is an error, not a
// silently ignored option.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace specserve {

class CliArgs {
 public:
  explicit CliArgs(std::string usage) : usage_(std::move(usage)) {}

  // Declare before Parse. `dflt` is shown in --help; boolean flags take no value.
  void Flag(const std::string& name, const std::string& dflt, const std::string& help);
  void BoolFlag(const std::string& name, const std::string& help);

  // INVALID_ARGUMENT naming an unknown flag or a missing value.
  absl::Status Parse(int argc, char** argv, int first = 1);

  bool help() const { return help_; }
  std::string HelpText() const;
  bool Given(const std::string& name) const { return given_.count(name) > 0; }
  const std::vector<std::string>& positional() const { return positional_; }

  std::string Str(const std::string& name) const;
  absl::StatusOr<int64_t> Int(const std::string& name, int64_t lo, int64_t hi) const;
  absl::StatusOr<double> Double(const std::string& name, double lo, double hi) const;
  bool Bool(const std::string& name) const;

 private:
  struct Spec {
    std::string dflt;
    std::string help;
    bool boolean = false;
  };
  std::string usage_;
  std::map<std::string, Spec> specs_;
  std::vector<std::string> order_;
  std::map<std::string, std::string> given_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

}  // namespace specserve
