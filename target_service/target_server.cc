#include "target_service/target_server.h"

namespace specserve {

absl::Status TargetServer::Accept(uint64_t, Entry& e, v1::TargetRequest msg, rpc::Clock::time_point received) {
  if (!msg.has_verify()) return absl::InvalidArgumentError("expected `verify` or `close`");
  // One request at a time is the protocol; a little pipelining is tolerated.
  if (e.state.queued.size() >= 4) return absl::FailedPreconditionError("too many verify requests in flight");
  e.state.queued.emplace_back(std::move(*msg.mutable_verify()), received);
  return absl::OkStatus();
}

absl::StatusOr<bool> TargetServer::NextPass(Entry& e, ForwardSeq* pass) {
  TargetStreamState& st = e.state;
  if (st.queued.empty()) return false;
  auto [req, received] = std::move(st.queued.front());
  st.queued.pop_front();
  ASSIGN_OR_RETURN(Proposal p, rpc::ProposalFromProto(req.tokens(), req.dists()));
  RETURN_IF_ERROR(st.session->BeginVerify(req.round(), p, pass));
  st.received = received;
  return true;
}

absl::Status TargetServer::FinishPass(Entry& e, const ForwardSeq& pass, const float* logits) {
  ASSIGN_OR_RETURN(RoundResult v, e.state.session->FinishVerify(logits));
  return Answer(e, pass, std::move(v));
}

absl::Status TargetServer::FinishVerifiedPass(Entry& e, const ForwardSeq& pass, const VerifyResult& result) {
  ASSIGN_OR_RETURN(RoundResult v, e.state.session->FinishVerify(result));
  return Answer(e, pass, std::move(v));
}

absl::Status TargetServer::Answer(Entry& e, const ForwardSeq& pass, RoundResult v) {
  metrics().rollback_tokens.Increment(pass.n_logits - 1 - v.accepted);
  v1::TargetResponse r;
  v1::VerifyResult* res = r.mutable_verified();
  res->set_round(v.round);
  res->set_accepted(v.accepted);
  res->set_next_token(v.next_token);
  rpc::LogprobsToProto(v.logprobs, res->mutable_logprobs());
  // Time on this service, queueing included: the caller counts the rest as network.
  res->set_compute_seconds(rpc::SecondsSince(e.state.received));
  TargetLoad load = PassCost();
  load.active_sessions = static_cast<double>(sessions_.size());
  load.gather_seconds = gather_seconds();
  rpc::TargetLoadToProto(load, res->mutable_load());
  e.handle->Send(std::move(r));
  return absl::OkStatus();
}

}  // namespace specserve
