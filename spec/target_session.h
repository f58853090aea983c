// One request's state on the target: its KV cache, the committed sequence
// and the round counter. A pass is split into Begin (what to feed) and Finish
// (what the logits decide) so the service's scheduler can run many sessions'
// passes as one ragged batch; the in-process verifier calls them back to back.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/backend.h"
#include "spec/committed_sequence.h"
#include "spec/round.h"
#include "spec/verify.h"

namespace specserve {

class TargetSession {
 public:
  TargetSession(KvPool& pool, const ModelConfig& config) : pool_(pool), config_(config) {}
  ~TargetSession() { Close(); }
  TargetSession(const TargetSession&) = delete;
  TargetSession& operator=(const TargetSession&) = delete;

  // Validates the spec; *prefill is the pass that caches prompt[0..n-2]
  // (no tokens when the prompt is one token long: skip it).
  absl::Status Open(const SessionSpec& spec, ForwardSeq* prefill);

  // The verify pass over [pending, d1..dK] at positions L-1..L+K-1, with
  // logits for all K+1 rows. FAILED_PRECONDITION for a stale or repeated
  // round; INVALID_ARGUMENT for a malformed proposal; OUT_OF_RANGE when the
  // round could commit past the session's max_new_tokens.
  absl::Status BeginVerify(int64_t round, const Proposal& p, ForwardSeq* pass);
  // The block and rule of the pass in flight, for Backend::ForwardVerify
  // (its target_logits is null: the backend supplies the rows). Valid until
  // FinishVerify or AbortVerify; nullptr when no pass is in flight. A round
  // that needs its logits on the host (e.g. to report logprobs) returns
  // nullptr here and takes FinishVerify(logits) instead; so does a
  // constrained one (SessionSpec::host_sampling): its rows are transformed
  // on the host (spec/logit_rules.h) before the CPU Verify, which keeps
  // every backend exact with no kernel of its own.
  const VerifyInput* verify_block() const {
    return in_flight_ && !spec_.logprobs && !spec_.host_sampling() ? &verify_ : nullptr;
  }
  // Commits what the backend's verify step decided for the pass in flight
  // and rolls the cache back to the committed sequence minus its new pending
  // token; the constraint state advances by d1..dn, x. INVALID_ARGUMENT for
  // a result outside [0, K] or the vocabulary; FAILED_PRECONDITION when the
  // constraint's filter refuses a committed token (it allowed no token).
  absl::StatusOr<RoundResult> FinishVerify(const VerifyResult& v);
  // The same from the pass's logits [K+1, vocab], verified on the CPU after
  // the constraint's transform (row i with the state after d1..di); logprobs
  // are of the raw rows.
  absl::StatusOr<RoundResult> FinishVerify(const float* logits);
  // Undoes a BeginVerify whose pass failed (the cache is unchanged by it).
  void AbortVerify() { in_flight_ = false; }

  void Close();  // returns every KV block; idempotent

  bool open() const { return open_; }
  int64_t next_round() const { return seq_.next_round(); }
  int32_t committed_length() const { return seq_.size(); }
  const std::vector<TokenId>& committed() const { return seq_.tokens(); }
  const KvSeq& kv() const { return kv_; }

 private:
  KvPool& pool_;
  const ModelConfig& config_;
  bool open_ = false;
  SessionSpec spec_;
  CommittedSequence seq_;
  void PublishPromptPrefix();
  bool prefix_published_ = false;  // the prompt's blocks are in the prefix cache
  KvSeq kv_;                     // holds the committed sequence but its pending token
  bool in_flight_ = false;
  Proposal proposal_;            // the round being verified
  std::vector<TokenId> feed_;    // [pending, d1..dK]
  VerifyInput verify_;           // over proposal_, target_logits null
  LogitState rules_state_;       // the constraint at the committed sequence (over spec_.rules)
  std::vector<float> rows_;      // [K+1, vocab] transformed rows (constrained sessions)
};

}  // namespace specserve
