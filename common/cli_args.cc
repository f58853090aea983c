#include "common/cli_args.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace specserve {

void CliArgs::Flag(const std::string& name, const std::string& dflt, const std::string& help) {
  if (!specs_.count(name)) order_.push_back(name);
  specs_[name] = Spec{dflt, help, false};
}

void CliArgs::BoolFlag(const std::string& name, const std::string& help) {
  if (!specs_.count(name)) order_.push_back(name);
  specs_[name] = Spec{"false", help, true};
}

absl::Status CliArgs::Parse(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      help_ = true;
      continue;
    }
    if (a.rfind("--", 0) != 0) {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    auto it = specs_.find(name);
    if (it == specs_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " (see --help)"));
    }
    if (it->second.boolean) {
      given_[name] = has_value ? value : "true";
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
      value = argv[++i];
    }
    given_[name] = value;
  }
  return absl::OkStatus();
}

std::string CliArgs::HelpText() const {
  std::string s = usage_ + "\n\nFlags:\n";
  for (const std::string& n : order_) {
    const Spec& sp = specs_.at(n);
    std::string left = "  --" + n + (sp.boolean ? "" : " VALUE");
    if (left.size() < 28) left.resize(28, ' ');
    absl::StrAppend(&s, left, " ", sp.help);
    if (!sp.boolean && !sp.dflt.empty()) absl::StrAppend(&s, " (default: ", sp.dflt, ")");
    s += "\n";
  }
  return s;
}

std::string CliArgs::Str(const std::string& name) const {
  if (auto it = given_.find(name); it != given_.end()) return it->second;
  auto sp = specs_.find(name);
  return sp == specs_.end() ? "" : sp->second.dflt;
}

absl::StatusOr<int64_t> CliArgs::Int(const std::string& name, int64_t lo, int64_t hi) const {
  int64_t v;
  const std::string s = Str(name);
  if (!absl::SimpleAtoi(s, &v) || v < lo || v > hi) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be an integer in [", lo, ", ", hi, "], got '", s, "'"));
  }
  return v;
}

absl::StatusOr<double> CliArgs::Double(const std::string& name, double lo, double hi) const {
  double v;
  const std::string s = Str(name);
  if (!absl::SimpleAtod(s, &v) || !(v >= lo && v <= hi)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be a number in [", lo, ", ", hi, "], got '", s, "'"));
  }
  return v;
}

bool CliArgs::Bool(const std::string& name) const {
  const std::string s = Str(name);
  return s == "true" || s == "1" || s == "yes";
}

}  // namespace specserve
