// How many CPU threads a process should run by default (--threads auto):
// the cores it may use, which is its affinity mask (taskset, --cpus, a
// Kubernetes static CPU policy) lowered to its cgroup's CPU quota (a
// Kubernetes CPU limit), rounded up. A forward pass's workers spin between
// parallel loops, so a pool larger than the cores the process really gets
// waits on descheduled workers instead of running faster.
#pragma once

#include <optional>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace specserve {

// The cores in this process's affinity mask, at least 1.
int AffinityCpus();

// The quota of one cgroup's CPU controller, in cores (may be fractional):
// cgroup v2 `cpu.max` ("QUOTA PERIOD" or "max PERIOD"), or cgroup v1's
// cpu.cfs_quota_us and cpu.cfs_period_us contents (quota -1: none).
// nullopt when there is no limit or the text is not understood.
std::optional<double> CgroupV2CpuQuota(absl::string_view cpu_max);
std::optional<double> CgroupV1CpuQuota(absl::string_view quota_us, absl::string_view period_us);

// The smallest CPU quota on the path from this process's cgroup up to the
// root, read from /proc/self/cgroup and /sys/fs/cgroup; nullopt when none.
std::optional<double> CgroupCpuQuota();

// min(cpus, ceil(quota)) where there is a quota; `cpus` when there is none;
// at least 1. `cpus` is what the process may run on (AffinityCpus(), or the
// length of a --cpus list it pins itself to).
int UsableCpus(int cpus, std::optional<double> quota);
int UsableCpus();

// --threads: "auto" is max(1, usable - reserved) (`reserved`: cores this
// process gives a thread of its own, such as an overlapped draft);
// otherwise an integer in [1, 256]. INVALID_ARGUMENT names the flag.
absl::StatusOr<int> ThreadsFromFlag(const std::string& value, int usable, int reserved = 0);

}  // namespace specserve
