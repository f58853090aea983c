// Conversions between the wire messages (proto/specserve/v1/internal.proto)
// and the engine's structs (spec/round.h, spec/sampling.h,
// common/spm_tokenizer.h). Everything read off the wire is checked here for
// shape (matching lengths); range checks stay with the engine
// (ValidateSessionSpec, ValidateSparseDist), so both paths refuse alike.
#pragma once

#include "absl/status/statusor.h"
#include "common/bpe_tokenizer.h"
#include "common/spm_tokenizer.h"
#include "spec/round.h"
#include "specserve/v1/internal.pb.h"

namespace specserve::rpc {

v1::SessionOpen SpecToProto(const SessionSpec& spec);
SessionSpec SpecFromProto(const v1::SessionOpen& open);

// A round's committed logprobs (RoundResult::logprobs) on the wire;
// INVALID_ARGUMENT when an entry's alternative ids and logprobs differ in length.
void LogprobsToProto(absl::Span<const TokenLogprob> in,
                     google::protobuf::RepeatedPtrField<v1::CommittedLogprob>* out);
absl::StatusOr<std::vector<TokenLogprob>> LogprobsFromProto(
    const google::protobuf::RepeatedPtrField<v1::CommittedLogprob>& in);

// A one-hot q at `token` travels with no entries (the greedy draft and the
// n-gram drafter send only those), anything else as (ids, probs).
void DistToProto(const SparseDist& q, TokenId token, v1::SparseDist* out);
// INVALID_ARGUMENT when ids and probs differ in length.
absl::StatusOr<SparseDist> DistFromProto(const v1::SparseDist& q, TokenId token);

// Tokens and their distributions, as carried by VerifyRequest and Proposal.
// INVALID_ARGUMENT when the counts differ.
absl::StatusOr<Proposal> ProposalFromProto(
    const google::protobuf::RepeatedField<int32_t>& tokens,
    const google::protobuf::RepeatedPtrField<v1::SparseDist>& dists);
void ProposalToProto(const Proposal& p, google::protobuf::RepeatedField<int32_t>* tokens,
                     google::protobuf::RepeatedPtrField<v1::SparseDist>* dists);

// The target's load report (spec/target_load.h). A table whose arrays differ
// in length, or whose widths are not finite, positive and increasing, is
// dropped (the line still holds). The target sets load.active_sessions (its
// open sessions) before sending; PassCostModel does not know them.
void TargetLoadToProto(const TargetLoad& load, v1::TargetLoad* out);
TargetLoad TargetLoadFromProto(const v1::TargetLoad& in);

// The tokenizer travels as its GGUF metadata (pieces, scores or merges,
// types, special ids, flags), so the coordinator rebuilds the same tokenizer
// (MakeSpmTokenizer / MakeBpeTokenizer) without the model file.
v1::TokenizerInfo TokenizerInfoFromVocab(const SpmVocab& vocab);
v1::TokenizerInfo TokenizerInfoFromVocab(const BpeVocab& vocab);
// Reads the vocabulary `f` holds, whichever kind; UNIMPLEMENTED for others.
absl::StatusOr<v1::TokenizerInfo> TokenizerInfoFromGguf(const GgufFile& f);
// INVALID_ARGUMENT when the model is not "llama" or the arrays disagree in length.
absl::StatusOr<SpmVocab> VocabFromTokenizerInfo(const v1::TokenizerInfo& info);
// The tokenizer `info` describes ("llama" or "gpt2"); INVALID_ARGUMENT otherwise.
absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerFromInfo(const v1::TokenizerInfo& info);

}  // namespace specserve::rpc
