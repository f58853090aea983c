// The coordinator's connections to the target and draft services, and what
// it learns from them at start: the target's model info and tokenizer (no
// shared file system needed) and whether the draft may be used.
//
// Draft policy: a draft whose vocabulary differs from the target's would
// make every proposal meaningless. If the draft answers at start-up with a
// different vocabulary, start-up fails (a wrong deployment should be loud).
// If it is not reachable yet, the coordinator serves without it (n-gram
// drafting, counted as fallbacks) while a background thread keeps asking it
// (every ~250 ms, with short reconnect backoff on the channel), so requests
// never wait on that check and use the draft as soon as it answers; a
// mismatch found then refuses the draft for good, with a log line.
//
// Circuit breaker: a draft call that fails or times out (DraftFailed) opens
// the draft's circuit: requests skip the draft (n-gram drafting, no waiting on
// a stalled service) until a background probe finds it answering again.
//
// Target watch: the same background thread asks the target's health every
// `health_interval`; on_target_health hears each change (the coordinator's
// own health follows it).
#pragma once

#include <atomic>
#include <functional>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "coordinator/target_load_board.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/model_config.h"
#include "common/tokenizer.h"
#include "constrain/grammar_compiler.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "rpc/tls.h"
#include "specserve/v1/internal.grpc.pb.h"

namespace specserve {

class Upstreams {
 public:
  struct Options {
    std::string target;               // HOST:PORT, required
    std::string draft;                // HOST:PORT, or empty
    int max_message_bytes = 64 << 20;
    double connect_timeout_seconds = 60;  // how long to wait for the target at start
    // gRPC load balancing over the addresses a name resolves to: each session
    // (one stream) goes to the next ready replica.
    std::string lb_policy = "round_robin";
    // enabled: mutual TLS to both services (the CA verifies their
    // certificates, which must name the HOST of `target` / `draft`; ours
    // is presented to them). Otherwise plaintext.
    rpc::TlsConfig tls;
    std::chrono::milliseconds health_interval{500};
    // Called from the watch thread when the target starts or stops answering.
    std::function<void(bool serving)> on_target_health;
    // Polled while waiting for the target at start: true ends the wait
    // (CANCELLED), e.g. on SIGTERM.
    std::function<bool()> should_stop;
  };

  // Waits for the target's model info (retrying until the timeout), builds
  // its tokenizer, and checks the draft once. UNAVAILABLE when the target
  // never answers; INVALID_ARGUMENT for an unusable tokenizer or a draft
  // with another vocabulary.
  static absl::StatusOr<std::unique_ptr<Upstreams>> Connect(const Options& opts);
  ~Upstreams();
  Upstreams(const Upstreams&) = delete;
  Upstreams& operator=(const Upstreams&) = delete;

  v1::TargetService::StubInterface* target() { return target_.get(); }
  const v1::ModelInfo& target_info() const { return target_info_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // Compiles requests' grammars (response_format) over that tokenizer.
  const constrain::GrammarCompiler& grammar() const { return *grammar_; }
  // vocab, n_ctx and name of the target model (for ValidateSessionSpec).
  const ModelConfig& config() const { return config_; }

  bool draft_configured() const { return draft_ != nullptr; }
  // The draft stub when it is usable now; nullptr otherwise (see the policy
  // above). Never blocks on the network.
  v1::DraftService::StubInterface* draft() ABSL_LOCKS_EXCLUDED(mu_);
  std::string draft_model() const ABSL_LOCKS_EXCLUDED(mu_);
  // The draft is configured and checked but its circuit is open.
  bool draft_circuit_open() const ABSL_LOCKS_EXCLUDED(mu_);
  // A draft call failed (not the request's own cancellation or deadline):
  // open the circuit. `why` is logged.
  void DraftFailed(absl::string_view why) ABSL_LOCKS_EXCLUDED(mu_);
  bool target_serving() const { return target_serving_.load(); }
  // The target's latest load report, posted by every request's rounds.
  TargetLoadBoard& target_load() { return target_load_; }

 private:
  enum class DraftState { kNone, kUnchecked, kOk, kRefused };
  // Asks the draft for its model info and compares vocabularies. Takes mu_
  // only after the call: the RPC must not hold the lock.
  absl::Status CheckDraft(std::chrono::milliseconds timeout, bool wait_for_ready) ABSL_LOCKS_EXCLUDED(mu_);
  // The watch thread: probes an unchecked draft or one whose circuit is
  // open, and the target's health.
  void Watch() ABSL_LOCKS_EXCLUDED(mu_);
  void WatchTarget();
  Upstreams() = default;

  Options opts_;
  std::shared_ptr<grpc::Channel> target_channel_;
  std::unique_ptr<v1::TargetService::Stub> target_;
  std::unique_ptr<grpc::health::v1::Health::Stub> target_health_;  // the watch thread's
  std::unique_ptr<v1::DraftService::Stub> draft_;
  v1::ModelInfo target_info_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<constrain::GrammarCompiler> grammar_;
  ModelConfig config_;

  mutable absl::Mutex mu_;
  DraftState draft_state_ ABSL_GUARDED_BY(mu_) = DraftState::kNone;
  std::string draft_model_ ABSL_GUARDED_BY(mu_);
  bool circuit_open_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // the watch thread's pauses end at once
  std::atomic<bool> target_serving_{true};
  TargetLoadBoard target_load_;
  std::thread watcher_;
};

}  // namespace specserve
