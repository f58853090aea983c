// Admission control of the model services (rpc/admission.h): the session
// and KV-block limits, and draining.
#include <gtest/gtest.h>

#include "rpc/admission.h"

namespace specserve {
namespace {

TEST(AdmissionTest, LimitsAndDraining) {
  rpc::Admission a(/*max_sessions=*/2, /*kv_blocks=*/10);
  EXPECT_TRUE(a.Admit(6).ok());
  EXPECT_EQ(a.Admit(5).code(), absl::StatusCode::kResourceExhausted);  // 11 > 10 blocks
  EXPECT_TRUE(a.Admit(4).ok());
  EXPECT_EQ(a.Admit(0).code(), absl::StatusCode::kResourceExhausted);  // session limit
  a.Release(6);
  EXPECT_EQ(a.active(), 1);
  a.StartDraining();
  EXPECT_EQ(a.Admit(1).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(rpc::Admission::BlocksFor(33, 16), 3);
}

}  // namespace
}  // namespace specserve
