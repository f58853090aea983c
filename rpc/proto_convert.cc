#include "rpc/proto_convert.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace specserve::rpc {

v1::SessionOpen SpecToProto(const SessionSpec& spec) {
  v1::SessionOpen o;
  o.mutable_prompt()->Add(spec.prompt.begin(), spec.prompt.end());
  v1::SamplingRule* s = o.mutable_sampling();
  s->set_temperature(spec.target.temperature);
  s->set_top_k(spec.target.top_k);
  s->set_top_p(spec.target.top_p);
  s->set_seed(spec.target.seed);
  s->set_min_p(spec.target.min_p);
  v1::DraftRule* d = o.mutable_draft();
  d->set_temperature(spec.draft.temperature);
  d->set_top_n(spec.draft.top_n);
  d->set_top_p(spec.draft.top_p);
  d->set_lookup_min_ngram(spec.draft.lookup_min_ngram);
  o.set_max_new_tokens(spec.max_new_tokens);
  o.set_logprobs(spec.logprobs);
  o.set_top_logprobs(spec.top_logprobs);
  const LogitRules& r = spec.rules;
  for (const auto& [id, bias] : r.logit_bias) (*o.mutable_logit_bias())[id] = bias;
  o.set_presence_penalty(r.presence_penalty);
  o.set_frequency_penalty(r.frequency_penalty);
  o.set_min_tokens(r.min_tokens);
  o.set_ignore_eos(r.ignore_eos);
  o.mutable_eos_ids()->Add(r.eos_ids.begin(), r.eos_ids.end());
  o.mutable_stop_ids()->Add(r.stop_ids.begin(), r.stop_ids.end());
  o.set_grammar(r.grammar);
  return o;
}

SessionSpec SpecFromProto(const v1::SessionOpen& o) {
  SessionSpec spec;
  spec.prompt.assign(o.prompt().begin(), o.prompt().end());
  spec.target.temperature = o.sampling().temperature();
  spec.target.top_k = o.sampling().top_k();
  spec.target.top_p = o.sampling().top_p();
  spec.target.seed = o.sampling().seed();
  spec.target.min_p = o.sampling().min_p();
  // An absent DraftRule reads as all zeros; zero top_n / top_p mean "default".
  spec.draft.temperature = o.draft().temperature();
  spec.draft.top_n = o.draft().top_n() == 0 ? kDefaultDraftTopN : o.draft().top_n();
  spec.draft.top_p = o.draft().top_p() == 0 ? 1.0f : o.draft().top_p();
  spec.draft.lookup_min_ngram = o.draft().lookup_min_ngram();
  spec.max_new_tokens = o.max_new_tokens();
  spec.logprobs = o.logprobs();
  spec.top_logprobs = o.top_logprobs();
  LogitRules& r = spec.rules;
  // A proto map's order is unspecified: sorted by id, so both services (and
  // a re-sent spec) hold the same list.
  for (const auto& [id, bias] : o.logit_bias()) r.logit_bias.emplace_back(id, bias);
  std::sort(r.logit_bias.begin(), r.logit_bias.end());
  r.presence_penalty = o.presence_penalty();
  r.frequency_penalty = o.frequency_penalty();
  r.min_tokens = o.min_tokens();
  r.ignore_eos = o.ignore_eos();
  r.eos_ids.assign(o.eos_ids().begin(), o.eos_ids().end());
  r.stop_ids.assign(o.stop_ids().begin(), o.stop_ids().end());
  r.grammar = o.grammar();  // the receiver compiles it into r.filter
  return spec;
}

void LogprobsToProto(absl::Span<const TokenLogprob> in,
                     google::protobuf::RepeatedPtrField<v1::CommittedLogprob>* out) {
  for (const TokenLogprob& t : in) {
    v1::CommittedLogprob* c = out->Add();
    c->set_token(t.id);
    c->set_logprob(t.logprob);
    for (const TopLogprob& a : t.top) {
      c->add_top_ids(a.id);
      c->add_top_logprobs(a.logprob);
    }
  }
}

absl::StatusOr<std::vector<TokenLogprob>> LogprobsFromProto(
    const google::protobuf::RepeatedPtrField<v1::CommittedLogprob>& in) {
  std::vector<TokenLogprob> out;
  out.reserve(in.size());
  for (const v1::CommittedLogprob& c : in) {
    if (c.top_ids_size() != c.top_logprobs_size()) {
      return absl::InvalidArgumentError(absl::StrCat("a logprob entry has ", c.top_ids_size(), " alternatives but ",
                                                     c.top_logprobs_size(), " logprobs"));
    }
    TokenLogprob t;
    t.id = c.token();
    t.logprob = c.logprob();
    for (int i = 0; i < c.top_ids_size(); ++i) t.top.push_back({c.top_ids(i), c.top_logprobs(i)});
    out.push_back(std::move(t));
  }
  return out;
}

void DistToProto(const SparseDist& q, TokenId token, v1::SparseDist* out) {
  out->Clear();
  if (q.ids.size() == 1 && q.ids[0] == token && q.probs[0] == 1.0f) return;
  out->mutable_ids()->Add(q.ids.begin(), q.ids.end());
  out->mutable_probs()->Add(q.probs.begin(), q.probs.end());
}

absl::StatusOr<SparseDist> DistFromProto(const v1::SparseDist& q, TokenId token) {
  if (q.ids_size() != q.probs_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft distribution has ", q.ids_size(), " ids but ", q.probs_size(), " probabilities"));
  }
  if (q.ids_size() == 0) return SparseDist{{token}, {1.0f}};
  return SparseDist{{q.ids().begin(), q.ids().end()}, {q.probs().begin(), q.probs().end()}};
}

absl::StatusOr<Proposal> ProposalFromProto(const google::protobuf::RepeatedField<int32_t>& tokens,
                                           const google::protobuf::RepeatedPtrField<v1::SparseDist>& dists) {
  if (tokens.size() != dists.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("proposal has ", tokens.size(), " tokens but ", dists.size(), " distributions"));
  }
  Proposal p;
  p.tokens.assign(tokens.begin(), tokens.end());
  p.dists.reserve(tokens.size());
  for (int i = 0; i < tokens.size(); ++i) {
    ASSIGN_OR_RETURN(SparseDist q, DistFromProto(dists[i], tokens[i]));
    p.dists.push_back(std::move(q));
  }
  return p;
}

void ProposalToProto(const Proposal& p, google::protobuf::RepeatedField<int32_t>* tokens,
                     google::protobuf::RepeatedPtrField<v1::SparseDist>* dists) {
  tokens->Add(p.tokens.begin(), p.tokens.end());
  for (size_t i = 0; i < p.tokens.size(); ++i) DistToProto(p.dists[i], p.tokens[i], dists->Add());
}

v1::TokenizerInfo TokenizerInfoFromVocab(const SpmVocab& v) {
  v1::TokenizerInfo t;
  t.set_model("llama");
  for (const std::string& p : v.pieces) t.add_pieces(p);
  t.mutable_scores()->Add(v.scores.begin(), v.scores.end());
  for (TokenType ty : v.types) t.add_types(static_cast<int32_t>(ty));
  t.set_bos(v.bos);
  t.set_eos(v.eos);
  t.set_unk(v.unk);
  t.set_add_bos(v.add_bos);
  t.set_add_space_prefix(v.add_space_prefix);
  return t;
}

v1::TokenizerInfo TokenizerInfoFromVocab(const BpeVocab& v) {
  v1::TokenizerInfo t;
  t.set_model("gpt2");
  for (const std::string& p : v.pieces) t.add_pieces(p);
  for (TokenType ty : v.types) t.add_types(static_cast<int32_t>(ty));
  for (const std::string& m : v.merges) t.add_merges(m);
  t.set_pre(std::string(PreTokenizerName(v.pre)));
  t.set_bos(v.bos);
  t.set_eos(v.eos);
  t.set_add_bos(v.add_bos);
  t.set_ignore_merges(v.ignore_merges);
  return t;
}

absl::StatusOr<v1::TokenizerInfo> TokenizerInfoFromGguf(const GgufFile& f) {
  ASSIGN_OR_RETURN(std::string model, f.GetString("tokenizer.ggml.model"));
  if (model == "llama") {
    ASSIGN_OR_RETURN(SpmVocab v, ReadSpmVocab(f));
    return TokenizerInfoFromVocab(v);
  }
  if (model == "gpt2") {
    ASSIGN_OR_RETURN(BpeVocab v, ReadBpeVocab(f));
    return TokenizerInfoFromVocab(v);
  }
  return absl::UnimplementedError(absl::StrCat("tokenizer model \"", model, "\" cannot be described remotely"));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerFromInfo(const v1::TokenizerInfo& t) {
  if (t.model() == "llama") {
    ASSIGN_OR_RETURN(SpmVocab v, VocabFromTokenizerInfo(t));
    return MakeSpmTokenizer(std::move(v));
  }
  if (t.model() != "gpt2") {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer model \"", t.model(), "\" is not supported remotely (\"llama\", \"gpt2\")"));
  }
  if (t.types_size() != t.pieces_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer info has ", t.pieces_size(), " pieces and ", t.types_size(), " types"));
  }
  BpeVocab v;
  v.pieces.assign(t.pieces().begin(), t.pieces().end());
  for (int32_t ty : t.types()) v.types.push_back(static_cast<TokenType>(ty));
  v.merges.assign(t.merges().begin(), t.merges().end());
  absl::StatusOr<PreTokenizer> pre = PreTokenizerFromName(t.pre());
  if (!pre.ok()) return absl::InvalidArgumentError(pre.status().message());
  v.pre = *pre;
  v.bos = t.bos();
  v.eos = t.eos();
  v.add_bos = t.add_bos();
  v.ignore_merges = t.ignore_merges();
  return MakeBpeTokenizer(std::move(v));  // validates ids, types and merges
}

absl::StatusOr<SpmVocab> VocabFromTokenizerInfo(const v1::TokenizerInfo& t) {
  if (t.model() != "llama") {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer model \"", t.model(), "\" is not supported remotely (only \"llama\")"));
  }
  if (t.scores_size() != t.pieces_size() || t.types_size() != t.pieces_size()) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer info has ", t.pieces_size(), " pieces, ",
                                                   t.scores_size(), " scores and ", t.types_size(), " types"));
  }
  SpmVocab v;
  v.pieces.assign(t.pieces().begin(), t.pieces().end());
  v.scores.assign(t.scores().begin(), t.scores().end());
  for (int32_t ty : t.types()) v.types.push_back(static_cast<TokenType>(ty));
  v.bos = t.bos();
  v.eos = t.eos();
  v.unk = t.unk();
  v.add_bos = t.add_bos();
  v.add_space_prefix = t.add_space_prefix();
  return v;  // MakeSpmTokenizer validates ids and types
}

void TargetLoadToProto(const TargetLoad& load, v1::TargetLoad* out) {
  out->set_fixed_seconds(load.fixed_seconds);
  out->set_seconds_per_token(load.seconds_per_token);
  out->set_sessions_per_pass(load.sessions_per_pass);
  out->set_active_sessions(load.active_sessions);
  out->set_tokens_per_session(load.tokens_per_session);
  out->set_gather_seconds(load.gather_seconds);
  for (const PassCostPoint& p : load.passes) {
    out->add_pass_tokens(p.tokens);
    out->add_pass_seconds(p.seconds);
  }
}

TargetLoad TargetLoadFromProto(const v1::TargetLoad& in) {
  TargetLoad load{true, in.fixed_seconds(), in.seconds_per_token(), in.sessions_per_pass(), in.active_sessions(), {}};
  auto sane = [](double x) { return std::isfinite(x) && x >= 0 ? x : 0.0; };
  load.tokens_per_session = sane(in.tokens_per_session());
  load.gather_seconds = sane(in.gather_seconds());
  if (in.pass_tokens_size() != in.pass_seconds_size()) return load;
  for (int i = 0; i < in.pass_tokens_size(); ++i) {
    const double t = in.pass_tokens(i), s = in.pass_seconds(i);
    const bool ordered = load.passes.empty() || t > load.passes.back().tokens;
    if (!std::isfinite(t) || !std::isfinite(s) || t <= 0 || s < 0 || !ordered) {
      load.passes.clear();
      return load;
    }
    load.passes.push_back({t, s});
  }
  return load;
}

}  // namespace specserve::rpc
