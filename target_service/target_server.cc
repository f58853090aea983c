#include "target_service/target_server.h"

namespace specserve {
namespace {

using Req = v1::TargetRequest;
using Resp = v1::TargetResponse;

}  // namespace

absl::Status TargetServer::Accept(uint64_t, Entry& e, Req msg, rpc::Clock::time_point received) {
  if (!msg.has_verify()) return absl::InvalidArgumentError("expected `verify` or `close`");
  // One request at a time is the protocol; a little pipelining is tolerated.
  if (e.state.queued.size() >= 4) return absl::FailedPreconditionError("too many verify requests in flight");
  e.state.queued.emplace_back(std::move(*msg.mutable_verify()), received);
  return absl::OkStatus();
}

bool TargetServer::HasWork() const {
  for (const auto& [id, e] : sessions_) {
    if (e.state.prefill_pending || !e.state.queued.empty()) return true;
  }
  return false;
}

void TargetServer::Iterate() {
  passes_.clear();
  pass_ids_.clear();
  std::vector<std::pair<uint64_t, absl::Status>> failed;
  // At most one pass per session: its prefill, else its oldest verify request.
  for (auto& [id, e] : sessions_) {
    TargetState& st = e.state;
    st.pass = TargetState::Pass::kNone;
    if (TakePrefill(id, st)) continue;
    if (st.queued.empty()) continue;
    auto [req, received] = std::move(st.queued.front());
    st.queued.pop_front();
    absl::StatusOr<Proposal> p = rpc::ProposalFromProto(req.tokens(), req.dists());
    ForwardSeq pass;
    absl::Status s = p.ok() ? st.session->BeginVerify(req.round(), *p, &pass) : p.status();
    if (!s.ok()) {
      failed.emplace_back(id, s);
      continue;
    }
    st.pass = TargetState::Pass::kVerify;
    st.received = received;
    passes_.push_back(pass);
    pass_ids_.push_back(id);
  }

  rpc::RunBatch(backend(), passes_, metrics(), &out_);
  const int64_t vocab = backend().config().vocab;
  for (size_t i = 0; i < passes_.size(); ++i) {
    Entry& e = sessions_.at(pass_ids_[i]);
    TargetState& st = e.state;
    if (!out_.status[i].ok()) {
      if (st.pass == TargetState::Pass::kVerify) st.session->AbortVerify();
      failed.emplace_back(pass_ids_[i], out_.status[i]);
      continue;
    }
    if (AnswerPrefill(e)) continue;
    const int32_t k = passes_[i].n_logits - 1;
    absl::StatusOr<RoundResult> v = st.session->FinishVerify(out_.logits.data() + out_.first_row[i] * vocab);
    if (!v.ok()) {
      failed.emplace_back(pass_ids_[i], v.status());
      continue;
    }
    metrics().rollback_tokens.Increment(k - v->accepted);
    Resp r;
    v1::VerifyResult* res = r.mutable_verified();
    res->set_round(v->round);
    res->set_accepted(v->accepted);
    res->set_next_token(v->next_token);
    // Time on this service, queueing included: the caller counts the rest as network.
    res->set_compute_seconds(rpc::SecondsSince(st.received));
    e.handle->Send(std::move(r));
  }
  for (auto& [id, s] : failed) EndSession(id, rpc::ToGrpc(s));
}

}  // namespace specserve
