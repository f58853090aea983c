#include "tools/spec_bench_util.h"

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "spec/sampling.h"

namespace specserve::cli {
namespace {

// Logits at every position of `seq`: [seq.size(), vocab].
absl::StatusOr<std::vector<float>> AllLogits(Backend& b, const std::vector<TokenId>& seq) {
  KvSeq kv;
  std::vector<float> logits;
  absl::Status s = b.Forward({ForwardSeq{&kv, seq, static_cast<int32_t>(seq.size())}}, &logits);
  b.kv_pool().Release(kv);
  RETURN_IF_ERROR(s);
  return logits;
}

// At each compared position (the index in seq of the token compared), the
// acceptance the rule predicts: greedy agreement, or sum_x min(p(x), q(x)).
absl::Status Explain(Backend& target, Backend& draft, const SessionSpec& spec, const std::vector<TokenId>& seq,
                     const std::vector<int64_t>& positions, BenchRun* out) {
  ASSIGN_OR_RETURN(std::vector<float> tl, AllLogits(target, seq));
  ASSIGN_OR_RETURN(std::vector<float> dl, AllLogits(draft, seq));
  const int32_t V = target.config().vocab;
  std::vector<float> p, qfull;
  for (int64_t pos : positions) {
    if (pos <= 0 || pos >= static_cast<int64_t>(seq.size())) continue;
    const float* trow = tl.data() + (pos - 1) * V;
    const float* drow = dl.data() + (pos - 1) * V;
    if (spec.target.temperature == 0) {
      out->explained_sum += Argmax(drow, V) == Argmax(trow, V);
    } else {
      TargetDistribution(trow, V, spec.target, &p);
      const SparseDist q = DraftDistribution(drow, V, spec.draft.temperature, spec.draft.top_n, spec.draft.top_p);
      double overlap = 0;
      for (size_t i = 0; i < q.ids.size(); ++i) overlap += std::min(p[q.ids[i]], q.probs[i]);
      out->explained_sum += overlap;
      // The same with the draft's untruncated softmax: how much the top-N cut costs.
      SamplingParams full;
      full.temperature = spec.draft.temperature;
      TargetDistribution(drow, V, full, &qfull);
      double overlap_full = 0;
      for (int32_t x = 0; x < V; ++x) overlap_full += std::min(p[x], qfull[x]);
      out->explained_full_sum += overlap_full;
    }
    ++out->explained_n;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::vector<TokenId>>> LoadPrompts(const std::string& path, const Tokenizer& tok,
                                                              int limit) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open prompt file ", path));
  std::vector<std::vector<TokenId>> prompts;
  std::string line;
  while (static_cast<int>(prompts.size()) < limit && std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("prompt") || !j["prompt"].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": a line without a string \"prompt\" field"));
    }
    prompts.push_back(tok.Encode(j["prompt"].get<std::string>(), true));
  }
  if (prompts.empty()) return absl::InvalidArgumentError(absl::StrCat(path, " has no prompts"));
  return prompts;
}

absl::Status RunConfig(Backend& target, Backend* draft, const RunSetup& setup,
                       const std::vector<std::vector<TokenId>>& prompts, BenchRun* out) {
  const v1::Drafter kind = setup.kind;
  const float temperature = setup.temperature;
  const int32_t max_tokens = setup.max_tokens;
  const bool explain = setup.explain;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SessionSpec spec;
    spec.prompt = prompts[i];
    spec.max_new_tokens = max_tokens;
    // A prompt that leaves no room for max_tokens keeps its first token (BOS)
    // and its last n_ctx - max_tokens - 1 tokens.
    const int64_t room = target.config().n_ctx - static_cast<int64_t>(max_tokens);
    if (static_cast<int64_t>(spec.prompt.size()) > room && room > 1) {
      std::vector<TokenId> cut{spec.prompt.front()};
      cut.insert(cut.end(), spec.prompt.end() - (room - 1), spec.prompt.end());
      spec.prompt = std::move(cut);
    }
    spec.target.temperature = temperature;
    spec.target.seed = i;
    spec.draft.temperature = temperature;
    spec.draft.lookup_min_ngram = setup.lookup_min_ngram;
    LoopOptions opts;
    opts.k = setup.k;
    opts.overlap = setup.overlap;
    std::vector<TokenId> seq = spec.prompt;
    std::vector<int64_t> compared;
    int64_t first_round_tokens = -1;
    opts.on_round = [&](const RoundRecord& r) {
      const int32_t drafted = r.drafted, accepted = r.accepted;
      const int64_t base = static_cast<int64_t>(seq.size());
      for (int32_t j = 0; j < std::min(drafted, accepted + 1); ++j) compared.push_back(base + j);
      out->compared += std::min(drafted, accepted + 1);
    };
    opts.on_tokens = [&](absl::Span<const TokenId> t) {
      if (first_round_tokens < 0) first_round_tokens = static_cast<int64_t>(t.size());
      seq.insert(seq.end(), t.begin(), t.end());
      return true;
    };
    ASSIGN_OR_RETURN(LoopStats st, GenerateInProcess(target, draft, kind, spec, opts));
    out->decode_tokens += st.generated - std::max<int64_t>(0, first_round_tokens);
    out->decode_seconds += st.total_seconds - st.first_token_seconds;
    out->generated += st.generated;
    out->rounds += st.rounds;
    out->drafted += st.drafted;
    out->accepted += st.accepted;
    out->draft_s += st.draft_seconds;
    out->verify_s += st.verify_seconds;
    out->total_s += st.total_seconds;
    out->ahead_hits += st.ahead_hits;
    if (out->drafted_at.size() < st.drafted_at.size()) {
      out->drafted_at.resize(st.drafted_at.size());
      out->accepted_at.resize(st.drafted_at.size());
    }
    for (size_t j = 0; j < st.drafted_at.size(); ++j) {
      out->drafted_at[j] += st.drafted_at[j];
      out->accepted_at[j] += st.accepted_at[j];
    }
    if (explain && draft != nullptr) RETURN_IF_ERROR(Explain(target, *draft, spec, seq, compared, out));
  }
  out->stats_pos_acc.clear();
  for (size_t j = 0; j < out->drafted_at.size(); ++j) {
    out->stats_pos_acc.push_back(out->drafted_at[j] ? static_cast<double>(out->accepted_at[j]) / out->drafted_at[j] : 0);
  }
  return absl::OkStatus();
}

}  // namespace specserve::cli
