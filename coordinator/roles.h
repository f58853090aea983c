// The two roles of speculative decoding as the round loop sees them. The
// in-process engines (coordinator/local_engines.h) and the gRPC clients
// (coordinator/remote_engines.h) implement these, so the loop in
// coordinator/round_loop.h is the same code in one process and across three.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "spec/committed_sequence.h"
#include "spec/round.h"

namespace specserve {

// The registry name of the draft model's drafter, in process
// (coordinator/local_engines.h) and on the draft service (remote_engines.h).
inline constexpr absl::string_view kModelDrafterName = "model";

// Rounds are counted from the drafter's Open: the loop numbers them for it
// (a drafter opened late, or a fallback, starts again at 0).
class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual absl::Status Open(const SessionSpec& spec) = 0;
  // Blocks until the drafter can propose without waiting for its prefill (a
  // remote drafter: the service has answered `opened`). Commits may be sent
  // meanwhile, from another thread. The default: ready once Open returns.
  virtual absl::Status AwaitOpen() { return absl::OkStatus(); }
  // Applies a round's verdict: d1..dn of that round's proposal (n = 0 when
  // nothing was proposed for it), then next_token. Called after every
  // verified round, in order, without waiting for an answer where the drafter
  // is remote (an error there shows in the next Propose). A stale or
  // repeated round is refused with FAILED_PRECONDITION and changes nothing.
  virtual absl::Status Commit(const Verdict& v) = 0;
  // Proposes up to k tokens (k >= 1) for `round`, the round the next Commit
  // carries, from the committed sequence. One proposal per round.
  virtual absl::StatusOr<Proposal> Propose(int64_t round, int32_t k) = 0;
  virtual void Close() = 0;
  // Its registry name (coordinator/drafter_registry.h): what round records,
  // metric labels and the request's stats call it.
  virtual absl::string_view name() const = 0;
  // True when Propose crosses the network: its Proposal.compute_seconds is
  // the service's own time, and the rest of the call is transport.
  virtual bool remote() const { return false; }
  // Overlap (docs/round_protocol.md "Overlap"): called right after Propose, on another thread
  // while the target verifies, to draft the next round on the guess that all
  // of this one is accepted. The next Propose uses that block if the round's
  // Commit matches the guess. Optional: the default does nothing.
  virtual void PrepareAhead(int32_t k) {}
};

class Verifier {
 public:
  virtual ~Verifier() = default;
  virtual absl::Status Open(const SessionSpec& spec) = 0;
  // Verifies `p` (K = p.tokens.size(), 0 allowed: a plain decoding step).
  virtual absl::StatusOr<RoundResult> Verify(int64_t round, const Proposal& p) = 0;
  virtual void Close() = 0;
  // True when Verify crosses the network; its Open only sends the prompt, so
  // the first Verify waits for the service's prefill.
  virtual bool remote() const { return false; }
};

}  // namespace specserve
