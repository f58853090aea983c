#include "draft_service/draft_server.h"

namespace specserve {
namespace {

using Req = v1::DraftRequest;
using Resp = v1::DraftResponse;

}  // namespace

absl::Status DraftServer::Accept(uint64_t, Entry& e, Req msg, rpc::Clock::time_point received) {
  if (!msg.has_propose() && !msg.has_ahead()) {
    return absl::InvalidArgumentError("expected `propose`, `ahead` or `close`");
  }
  if (e.state.queued.size() >= 4) return absl::FailedPreconditionError("too many requests in flight");
  e.state.queued.emplace_back(std::move(msg), received);
  return absl::OkStatus();
}

bool DraftServer::HasWork() const {
  for (const auto& [id, e] : sessions_) {
    const DraftState& st = e.state;
    if (st.prefill_pending || st.proposing || !st.queued.empty()) return true;
  }
  return false;
}

bool DraftServer::StartProposal(DraftState& st, absl::Status* error) {
  auto [msg, received] = std::move(st.queued.front());
  st.queued.pop_front();
  if (msg.has_ahead()) {
    // Nothing to refuse: without a proposal to guess from it drafts nothing.
    st.session->BeginAhead(msg.ahead().k());
    st.proposing = st.ahead = true;
    return true;
  }
  const v1::ProposeRequest& req = msg.propose();
  std::optional<RoundResult> last;
  if (req.has_verdict()) {
    last = RoundResult{req.verdict().round(), req.verdict().accepted(), req.verdict().next_token(), 0};
  }
  const int32_t kv_before = st.session->kv().length;
  *error = st.session->BeginPropose(req.round(), last, req.k());
  if (!error->ok()) return false;
  if (kv_before > st.session->kv().length) metrics().rollback_tokens.Increment(kv_before - st.session->kv().length);
  st.proposing = true;
  st.ahead = false;
  st.received = received;
  return true;
}

void DraftServer::StepsDone(Entry& e) {
  DraftState& st = e.state;
  st.proposing = false;
  if (st.ahead) {
    st.ahead = false;
    return;
  }
  Proposal p = st.session->TakeProposal();
  st.last_proposed = static_cast<int32_t>(p.tokens.size());
  Resp r;
  v1::Proposal* out = r.mutable_proposal();
  out->set_round(st.session->next_round() - 1);
  rpc::ProposalToProto(p, out->mutable_tokens(), out->mutable_dists());
  out->set_drafted_ahead(p.drafted_ahead);
  out->set_looked_up(p.looked_up);
  // Time on this service, queueing included: the caller counts the rest as network.
  out->set_compute_seconds(rpc::SecondsSince(st.received));
  e.handle->Send(std::move(r));
}

void DraftServer::Iterate() {
  passes_.clear();
  pass_ids_.clear();
  std::vector<std::pair<uint64_t, absl::Status>> failed;
  for (auto& [id, e] : sessions_) {
    DraftState& st = e.state;
    st.pass = DraftState::Pass::kNone;
    if (TakePrefill(id, st)) continue;
    // A verdict that rejected part of the last proposal voids the guess the
    // block drafted ahead rests on: stop drafting it.
    if (st.ahead && !st.queued.empty() && st.queued.front().first.has_propose()) {
      const v1::ProposeRequest& next = st.queued.front().first.propose();
      if (next.has_verdict() && next.verdict().accepted() < st.last_proposed) {
        st.session->BeginAhead(0);
        st.proposing = st.ahead = false;
      }
    }
    absl::Status error;
    if (!st.proposing && !st.queued.empty() && !StartProposal(st, &error)) {
      failed.emplace_back(id, error);
      continue;
    }
    if (!st.proposing) continue;
    ForwardSeq pass;
    if (!st.session->NextStep(&pass)) {  // k = 0, or the block drafted ahead was taken
      StepsDone(e);
      continue;
    }
    st.pass = DraftState::Pass::kStep;
    passes_.push_back(pass);
    pass_ids_.push_back(id);
  }

  rpc::RunBatch(backend(), passes_, metrics(), &out_);
  const int64_t vocab = backend().config().vocab;
  for (size_t i = 0; i < passes_.size(); ++i) {
    Entry& e = sessions_.at(pass_ids_[i]);
    DraftState& st = e.state;
    if (!out_.status[i].ok()) {
      if (st.pass == DraftState::Pass::kStep) st.session->AbortPropose();
      failed.emplace_back(pass_ids_[i], out_.status[i]);
      continue;
    }
    if (AnswerPrefill(e)) continue;
    st.session->FinishStep(out_.logits.data() + out_.first_row[i] * vocab);
    ForwardSeq next;
    if (!st.session->NextStep(&next)) StepsDone(e);
  }
  for (auto& [id, s] : failed) EndSession(id, rpc::ToGrpc(s));
}

}  // namespace specserve
