#include "rpc/admission.h"

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace specserve::rpc {

absl::Status Admission::Admit(int32_t blocks) {
  absl::MutexLock lock(&mu_);
  if (draining_) return absl::UnavailableError("server is shutting down; not accepting new sessions");
  if (active_ >= max_sessions_) {
    return absl::ResourceExhaustedError(absl::StrCat("session limit reached (", max_sessions_, " sessions)"));
  }
  if (charged_blocks_ + blocks > kv_blocks_) {
    return absl::ResourceExhaustedError(absl::StrCat("KV pool full: session needs ", blocks, " blocks, ",
                                                     kv_blocks_ - charged_blocks_, " of ", kv_blocks_,
                                                     " are free"));
  }
  ++active_;
  charged_blocks_ += blocks;
  return absl::OkStatus();
}

void Admission::Release(int32_t blocks) {
  absl::MutexLock lock(&mu_);
  SPECSERVE_CHECK(active_ > 0 && charged_blocks_ >= blocks);
  --active_;
  charged_blocks_ -= blocks;
}

void Admission::StartDraining() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
}

int32_t Admission::active() const {
  absl::MutexLock lock(&mu_);
  return active_;
}

int32_t Admission::reserved_blocks() const {
  absl::MutexLock lock(&mu_);
  return charged_blocks_;
}

bool Admission::draining() const {
  absl::MutexLock lock(&mu_);
  return draining_;
}

}  // namespace specserve::rpc
