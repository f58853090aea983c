#include "draft_service/draft_server.h"

namespace specserve {

namespace {

// Requests one stream may have waiting: a proposal and a look-ahead at most
// from a well-behaved coordinator, and the commits of the plain rounds run
// while the session prefills (bounded by its token budget in practice).
constexpr size_t kMaxQueued = 256;

}  // namespace

absl::Status DraftServer::Accept(uint64_t, Entry& e, v1::DraftRequest msg, rpc::Clock::time_point received) {
  if (!msg.has_propose() && !msg.has_ahead() && !msg.has_commit()) {
    return absl::InvalidArgumentError("expected `propose`, `commit`, `ahead` or `close`");
  }
  if (e.state.queued.size() >= kMaxQueued) return absl::FailedPreconditionError("too many requests in flight");
  e.state.queued.emplace_back(std::move(msg), received);
  return absl::OkStatus();
}

absl::Status DraftServer::StartQueued(DraftStreamState& st) {
  while (!st.queued.empty() && st.queued.front().first.has_commit()) {
    const v1::Commit& c = st.queued.front().first.commit();
    const int32_t kv_before = st.session->kv().length;
    RETURN_IF_ERROR(st.session->Commit(Verdict{c.round(), c.accepted(), c.next_token()}));
    if (kv_before > st.session->kv().length) metrics().rollback_tokens.Increment(kv_before - st.session->kv().length);
    st.queued.pop_front();
  }
  if (st.queued.empty()) return absl::OkStatus();
  auto [msg, received] = std::move(st.queued.front());
  st.queued.pop_front();
  if (msg.has_ahead()) {
    // Nothing to refuse: without a proposal to guess from it drafts nothing.
    st.session->BeginAhead(msg.ahead().k());
    st.proposing = st.ahead = true;
    return absl::OkStatus();
  }
  const v1::ProposeRequest& req = msg.propose();
  RETURN_IF_ERROR(st.session->BeginPropose(req.round(), req.k()));
  st.proposing = true;
  st.ahead = false;
  st.received = received;
  return absl::OkStatus();
}

void DraftServer::StepsDone(Entry& e) {
  DraftStreamState& st = e.state;
  st.proposing = false;
  if (st.ahead) {
    st.ahead = false;
    return;
  }
  Proposal p = st.session->TakeProposal();
  st.last_proposed = static_cast<int32_t>(p.tokens.size());
  v1::DraftResponse r;
  v1::Proposal* out = r.mutable_proposal();
  out->set_round(st.session->next_round());
  rpc::ProposalToProto(p, out->mutable_tokens(), out->mutable_dists());
  out->set_drafted_ahead(p.drafted_ahead);
  out->set_looked_up(p.looked_up);
  // Time on this service, queueing included: the caller counts the rest as network.
  out->set_compute_seconds(rpc::SecondsSince(st.received));
  e.handle->Send(std::move(r));
}

absl::StatusOr<bool> DraftServer::NextPass(Entry& e, ForwardSeq* pass) {
  DraftStreamState& st = e.state;
  // A verdict that rejected part of the last proposal voids the guess the
  // block drafted ahead rests on: stop drafting it.
  if (st.ahead && !st.queued.empty() && st.queued.front().first.has_commit() &&
      st.queued.front().first.commit().accepted() < st.last_proposed) {
    st.session->BeginAhead(0);
    st.proposing = st.ahead = false;
  }
  if (!st.proposing && !st.queued.empty()) RETURN_IF_ERROR(StartQueued(st));
  if (!st.proposing) return false;
  if (st.session->NextStep(pass)) return true;
  StepsDone(e);  // k = 0, or the block drafted ahead was taken
  return false;
}

absl::Status DraftServer::FinishPass(Entry& e, const ForwardSeq&, const float* logits) {
  e.state.session->FinishStep(logits);
  ForwardSeq next;
  if (!e.state.session->NextStep(&next)) StepsDone(e);
  return absl::OkStatus();
}

absl::Status DraftServer::FinishSampledPass(Entry& e, const ForwardSeq&, DraftSample s) {
  e.state.session->FinishSampledStep(std::move(s));
  ForwardSeq next;
  if (!e.state.session->NextStep(&next)) StepsDone(e);
  return absl::OkStatus();
}

}  // namespace specserve
