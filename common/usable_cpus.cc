#include "common/usable_cpus.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace specserve {
namespace {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::optional<double> Min(std::optional<double> a, std::optional<double> b) {
  if (!a) return b;
  if (!b) return a;
  return std::min(*a, *b);
}

// "/a/b" -> {"/a/b", "/a", ""}: a cgroup and its ancestors, relative to the mount.
std::vector<std::string> SelfAndAncestors(std::string path) {
  std::vector<std::string> out;
  while (!path.empty() && path != "/") {
    out.push_back(path);
    path = path.substr(0, path.rfind('/'));
  }
  out.push_back("");
  return out;
}

}  // namespace

int AffinityCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

std::optional<double> CgroupV2CpuQuota(absl::string_view cpu_max) {
  std::vector<absl::string_view> f = absl::StrSplit(absl::StripAsciiWhitespace(cpu_max), ' ', absl::SkipEmpty());
  double quota = 0, period = 0;
  if (f.size() != 2 || f[0] == "max" || !absl::SimpleAtod(f[0], &quota) || !absl::SimpleAtod(f[1], &period) ||
      quota <= 0 || period <= 0) {
    return std::nullopt;
  }
  return quota / period;
}

std::optional<double> CgroupV1CpuQuota(absl::string_view quota_us, absl::string_view period_us) {
  double quota = 0, period = 0;
  if (!absl::SimpleAtod(absl::StripAsciiWhitespace(quota_us), &quota) ||
      !absl::SimpleAtod(absl::StripAsciiWhitespace(period_us), &period) || quota <= 0 || period <= 0) {
    return std::nullopt;
  }
  return quota / period;
}

std::optional<double> CgroupCpuQuota() {
  const std::optional<std::string> self = ReadFile("/proc/self/cgroup");
  if (!self) return std::nullopt;
  std::optional<double> quota;
  // Lines are "ID:CONTROLLERS:PATH": "0::PATH" under cgroup v2, a line
  // whose controllers include cpu under v1.
  for (absl::string_view line : absl::StrSplit(*self, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    if (f[0] == "0" && f[1].empty()) {
      for (const std::string& g : SelfAndAncestors(f[2])) {
        if (auto text = ReadFile(absl::StrCat("/sys/fs/cgroup", g, "/cpu.max"))) quota = Min(quota, CgroupV2CpuQuota(*text));
      }
    } else {
      std::vector<absl::string_view> controllers = absl::StrSplit(f[1], ',');
      if (std::find(controllers.begin(), controllers.end(), "cpu") == controllers.end()) continue;
      for (const char* mount : {"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"}) {
        for (const std::string& g : SelfAndAncestors(f[2])) {
          auto q = ReadFile(absl::StrCat(mount, g, "/cpu.cfs_quota_us"));
          auto p = ReadFile(absl::StrCat(mount, g, "/cpu.cfs_period_us"));
          if (q && p) quota = Min(quota, CgroupV1CpuQuota(*q, *p));
        }
      }
    }
  }
  return quota;
}

int UsableCpus(int cpus, std::optional<double> quota) {
  int n = std::max(1, cpus);
  if (quota) n = std::min(n, static_cast<int>(std::ceil(*quota - 1e-9)));
  return std::max(1, n);
}

int UsableCpus() { return UsableCpus(AffinityCpus(), CgroupCpuQuota()); }

absl::StatusOr<int> ThreadsFromFlag(const std::string& value, int usable, int reserved) {
  if (value == "auto") return std::max(1, usable - reserved);
  int n = 0;
  if (!absl::SimpleAtoi(value, &n) || n < 1 || n > 256) {
    return absl::InvalidArgumentError(absl::StrCat("--threads must be auto or an integer in [1, 256], got \"", value, "\""));
  }
  return n;
}

}  // namespace specserve
