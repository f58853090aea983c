// --cpus: pins a service to a set of CPU cores (sched_setaffinity), so that on
// a small machine the draft and the target each get a core of their own and
// do not evict each other's caches or wait behind each other's threads.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace specserve::rpc {

// "0", "1,3", "0-3", "0-1,6": the listed core numbers, ascending, each once.
// "" is the empty list (no pinning). INVALID_ARGUMENT for anything else.
absl::StatusOr<std::vector<int>> ParseCpuList(const std::string& list);

// Pins the calling process (every thread it creates from now on) to `cpus`;
// an empty list does nothing. FAILED_PRECONDITION naming the cores when the
// kernel refuses (a core this machine or container does not have).
absl::Status PinProcessToCpus(const std::vector<int>& cpus);

}  // namespace specserve::rpc
