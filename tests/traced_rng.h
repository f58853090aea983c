// Fresh random inputs every run that a failure can still reproduce: a
// generator seeded from std::random_device whose seed is in the trace of
// every gtest failure while it lives (as SCOPED_TRACE would put it). For the
// randomised suites such as AllOps/BackendOpsTest.
#pragma once
#include <cstdint>
#include <random>

#include <gtest/gtest.h>

namespace specserve::testing {

class TracedRng {
 public:
  TracedRng() : TracedRng(std::random_device()()) {}
  explicit TracedRng(uint32_t seed)
      : trace_(__FILE__, __LINE__, ::testing::Message() << "seed " << seed), rng_(seed) {}
  TracedRng(const TracedRng&) = delete;
  TracedRng& operator=(const TracedRng&) = delete;

  std::mt19937& get() { return rng_; }

 private:
  ::testing::ScopedTrace trace_;
  std::mt19937 rng_;
};

}  // namespace specserve::testing
