#include "rpc/cpu_affinity.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace specserve::rpc {

absl::StatusOr<std::vector<int>> ParseCpuList(const std::string& list) {
  std::vector<int> cpus;
  if (list.empty()) return cpus;
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("--cpus \"", list, "\": expected core numbers and ranges such as 0, 1,3 or 0-3"));
  };
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    std::vector<absl::string_view> ends = absl::StrSplit(part, '-');
    int lo = 0, hi = 0;
    if (ends.size() > 2 || !absl::SimpleAtoi(ends[0], &lo) || lo < 0) return bad();
    hi = lo;
    if (ends.size() == 2 && (!absl::SimpleAtoi(ends[1], &hi) || hi < lo)) return bad();
    if (hi >= CPU_SETSIZE) return bad();
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

absl::Status PinProcessToCpus(const std::vector<int>& cpus) {
  if (cpus.empty()) return absl::OkStatus();
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--cpus ", absl::StrJoin(cpus, ","), ": sched_setaffinity: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace specserve::rpc
