// libFuzzer target: what the services and the coordinator do with the
// protobuf messages they receive (rpc/proto_convert.h, the sessions of spec/,
// coordinator/request_plan.h), with the bundled code-target-7m config and
// tokenizers, and synthetic logits in place of the model.
//
// Input: one selector byte, then
//   0  a TargetService stream: varint-delimited v1::TargetRequest messages,
//      run as the target service runs them (open: SpecFromProto +
//      ValidateSessionSpec + TargetSession::Open; verify: ProposalFromProto +
//      BeginVerify + the pass's KV bookkeeping (PrepareBatch) + FinishVerify);
//   1  a DraftService stream: one schedule byte, then delimited
//      v1::DraftRequest messages (open / propose / commit / ahead), run
//      as draft_service/draft_server.cc does on a DraftSession; every
//      proposal it answers must be one the target accepts;
//   2  a v1::DraftResponse as the coordinator reads it (ProposalFromProto);
//   3  a public v1::GenerateRequest: PlanRequest with the SentencePiece and
//      the byte-level BPE tokenizer; a plan must pass the services' checks;
//   4  a v1::ModelInfo: TokenizerFromInfo, then encode and decode with it.
// fuzz/make_seeds.sh writes seeds of each kind.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/util/delimited_message_util.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/backend.h"
#include "common/kv_cache.h"
#include "common/model_config.h"
#include "common/status_macros.h"
#include "common/tokenizer.h"
#include "coordinator/request_plan.h"
#include "fuzz/fuzz_common.h"
#include "rpc/proto_convert.h"
#include "spec/draft_session.h"
#include "spec/round.h"
#include "spec/target_session.h"
#include "spec/verify.h"
#include "specserve/v1/generation.pb.h"
#include "specserve/v1/internal.pb.h"

namespace specserve {
namespace {

constexpr int kMaxMessages = 64;      // per stream
constexpr int32_t kBlockSize = 16;
constexpr int32_t kLogitRows = 41;    // distinct synthetic rows (prime: positions cycle through them)

struct Env {
  ModelConfig config;                  // code-target-7m: vocab 4096, context 1024
  std::unique_ptr<Tokenizer> spm, bpe;
  // [kLogitRows + kMaxVerifyK + 1, vocab]: a pass whose first row is position
  // p reads rows p % kLogitRows onwards, so positions get different logits.
  std::vector<float> logits;
};

const Env& GetEnv() {
  static const Env* const env = [] {
    auto* e = new Env;
    const std::unique_ptr<GgufFile> f = fuzz::OpenModel("code-target-7m.gguf");
    auto c = ModelConfig::FromGguf(*f);
    FUZZ_CHECK(c.ok(), "code-target-7m.gguf: no model config");
    e->config = *c;
    e->spm = fuzz::LoadTokenizer("code-target-7m.gguf", "llama");
    e->bpe = fuzz::LoadTokenizer("code-bpe-4m.gguf", "gpt2");
    FUZZ_CHECK(e->bpe->vocab_size() == e->config.vocab, "the two bundled vocabularies differ in size");
    const int64_t vocab = e->config.vocab;
    e->logits.resize((kLogitRows + kMaxVerifyK + 1) * vocab);
    uint32_t x = 12345;  // xorshift: a fixed, varied landscape with a few -inf
    for (int64_t r = 0; r < kLogitRows + kMaxVerifyK + 1; ++r) {
      for (int64_t v = 0; v < vocab; ++v) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        float l = static_cast<float>(x % 2000) / 200.0f - 5.0f;
        if (x % 509 == 0) l = -std::numeric_limits<float>::infinity();
        // One clear winner per row, among low ids the fuzzer finds quickly.
        if (v == (r * 7) % 64) l = 12.0f;
        e->logits[r * vocab + v] = l;
      }
    }
    // Errors the code under test logs (e.g. invalid UTF-8 in a string field)
    // would flood the output at thousands of inputs a second.
    google::protobuf::SetLogHandler(nullptr);
    return e;
  }();
  return *env;
}

const float* LogitsAt(const Env& env, int64_t position) {
  return env.logits.data() + (position % kLogitRows) * env.config.vocab;
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void CheckSpecRoundTrip(const SessionSpec& s) {
  const SessionSpec t = rpc::SpecFromProto(rpc::SpecToProto(s));
  FUZZ_CHECK(t.prompt == s.prompt && t.max_new_tokens == s.max_new_tokens);
  FUZZ_CHECK(SameBits(t.target.temperature, s.target.temperature) && t.target.top_k == s.target.top_k &&
             SameBits(t.target.top_p, s.target.top_p) && t.target.seed == s.target.seed);
  FUZZ_CHECK(SameBits(t.draft.temperature, s.draft.temperature) && t.draft.top_n == s.draft.top_n &&
             SameBits(t.draft.top_p, s.draft.top_p) && t.draft.lookup_min_ngram == s.draft.lookup_min_ngram);
}

void CheckProposalRoundTrip(const Proposal& p) {
  v1::Proposal m;
  rpc::ProposalToProto(p, m.mutable_tokens(), m.mutable_dists());
  auto q = rpc::ProposalFromProto(m.tokens(), m.dists());
  FUZZ_CHECK(q.ok(), "a proposal's own encoding is refused: %s", std::string(q.status().message()).c_str());
  FUZZ_CHECK(q->tokens == p.tokens && q->dists.size() == p.dists.size());
  for (size_t i = 0; i < p.dists.size(); ++i) {
    FUZZ_CHECK(q->dists[i].ids == p.dists[i].ids && q->dists[i].probs.size() == p.dists[i].probs.size());
    for (size_t j = 0; j < p.dists[i].probs.size(); ++j) {
      FUZZ_CHECK(SameBits(q->dists[i].probs[j], p.dists[i].probs[j]));
    }
  }
}

// What the target checks before verifying (TargetSession::BeginVerify).
absl::Status TargetAccepts(const Proposal& p, int32_t vocab) {
  if (p.tokens.size() > static_cast<size_t>(kMaxRoundK) || p.tokens.size() != p.dists.size()) {
    return absl::InvalidArgumentError("shape");
  }
  for (size_t i = 0; i < p.tokens.size(); ++i) {
    if (p.tokens[i] < 0 || p.tokens[i] >= vocab) return absl::InvalidArgumentError("token");
    RETURN_IF_ERROR(ValidateSparseDist(p.dists[i], vocab));
  }
  return absl::OkStatus();
}

// The backend's part of a pass without the model: the checks and KV
// reservation of PrepareBatch, then the cache grows by the pass's tokens
// (backends/cpu_backend.cc). False when the backend would refuse the pass.
bool Forward(const ForwardSeq& pass, const ModelConfig& config, KvPool& pool) {
  const ForwardSeq batch[] = {pass};
  if (!PrepareBatch(batch, config, pool).ok()) return false;
  pass.kv->length += static_cast<int32_t>(pass.tokens.size());
  return true;
}

template <typename Msg>
std::vector<Msg> ParseStream(const uint8_t* data, size_t size) {
  google::protobuf::io::CodedInputStream in(data, static_cast<int>(size));
  std::vector<Msg> out;
  while (static_cast<int>(out.size()) < kMaxMessages) {
    Msg m;
    bool clean_eof = false;
    if (!google::protobuf::util::ParseDelimitedFromCodedStream(&m, &in, &clean_eof)) break;
    out.push_back(std::move(m));
  }
  return out;
}

// The service's OnOpen: SpecFromProto, ValidateSessionSpec; then the
// session's Open and the prefill pass. False when the session ends there.
template <typename Session>
bool OpenSession(const v1::SessionOpen& open, Session& s, KvPool& pool, const ModelConfig& config) {
  const SessionSpec spec = rpc::SpecFromProto(open);
  CheckSpecRoundTrip(spec);
  if (!ValidateSessionSpec(spec, config).ok()) return false;
  ForwardSeq prefill;
  const absl::Status st = s.Open(spec, &prefill);
  FUZZ_CHECK(st.ok(), "Open refused a validated spec: %s", std::string(st.message()).c_str());
  FUZZ_CHECK(prefill.tokens.size() + 1 == spec.prompt.size() && prefill.n_logits == 0);
  return prefill.tokens.empty() || Forward(prefill, config, pool);
}

void RunTargetStream(const uint8_t* data, size_t size) {
  const Env& env = GetEnv();
  const ModelConfig& config = env.config;
  const std::vector<v1::TargetRequest> msgs = ParseStream<v1::TargetRequest>(data, size);
  if (msgs.empty() || !msgs[0].has_open()) return;
  KvPool pool(config.n_ctx / kBlockSize + 1, kBlockSize);
  {
    TargetSession s(pool, config);
    if (!OpenSession(msgs[0].open(), s, pool, config)) return;
    FUZZ_CHECK(s.kv().length == s.committed_length() - 1);
    for (size_t i = 1; i < msgs.size(); ++i) {
      const v1::TargetRequest& m = msgs[i];
      if (!m.has_verify()) break;  // close, or a refused message: the stream ends
      const v1::VerifyRequest& req = m.verify();
      auto p = rpc::ProposalFromProto(req.tokens(), req.dists());
      if (!p.ok()) break;
      CheckProposalRoundTrip(*p);
      const int32_t before = s.committed_length();
      ForwardSeq pass;
      if (!s.BeginVerify(req.round(), *p, &pass).ok()) break;
      const int32_t k = static_cast<int32_t>(p->tokens.size());
      FUZZ_CHECK(TargetAccepts(*p, config.vocab).ok(), "BeginVerify took a proposal the checks refuse");
      FUZZ_CHECK(pass.n_logits == k + 1 && static_cast<int32_t>(pass.tokens.size()) == k + 1);
      const int32_t kv_before = s.kv().length;
      if (!Forward(pass, config, pool)) {
        s.AbortVerify();
        break;
      }
      auto r = s.FinishVerify(LogitsAt(env, kv_before));
      FUZZ_CHECK(r.ok(), "FinishVerify failed on a begun pass: %s", std::string(r.status().message()).c_str());
      FUZZ_CHECK(r->round == req.round() && r->accepted >= 0 && r->accepted <= k, "round %lld accepted %d of %d",
                 static_cast<long long>(r->round), r->accepted, k);
      FUZZ_CHECK(r->next_token >= 0 && r->next_token < config.vocab, "next token %d", r->next_token);
      FUZZ_CHECK(s.committed_length() == before + r->accepted + 1);
      FUZZ_CHECK(s.kv().length == s.committed_length() - 1, "kv %d, committed %d", s.kv().length,
                 s.committed_length());
      FUZZ_CHECK(s.kv().length <= config.n_ctx);
    }
  }
  FUZZ_CHECK(pool.free_blocks() == pool.num_blocks(), "a closed session kept %d KV blocks", pool.used_blocks());
}

// One fuzzed draft stream on a DraftSession, as the draft service runs it.
class DraftStreamRun {
 public:
  DraftStreamRun(const Env& env, KvPool& pool, DraftSession& s, uint32_t schedule)
      : env_(env), config_(env.config), pool_(pool), s_(s), schedule_(schedule) {}

  // Runs one step: its pass and FinishStep. False when the pass fails
  // (the service then aborts: the session closes).
  bool Step() {
    ForwardSeq pass;
    if (!s_.NextStep(&pass)) return false;
    FUZZ_CHECK(pass.n_logits == 1 && !pass.tokens.empty());
    const int32_t kv_before = s_.kv().length;
    if (!Forward(pass, config_, pool_)) {
      s_.AbortPropose();
      return false;
    }
    s_.FinishStep(LogitsAt(env_, kv_before + static_cast<int32_t>(pass.tokens.size()) - 1));
    return true;
  }

  // Runs up to `budget` steps; false when one failed.
  bool Steps(int32_t budget) {
    ForwardSeq probe;
    for (int32_t run = 0; run < budget && s_.NextStep(&probe); ++run) {
      if (!Step()) return false;
    }
    return true;
  }

  // An `ahead` request; `next` is the message after it (may be null).
  bool Ahead(const v1::DraftRequest& m, const v1::DraftRequest* next) {
    s_.BeginAhead(m.ahead().k());
    // A commit that rejects part of the last proposal voids the guess; the
    // service stops the block at its next step, which may come after any
    // number of the block's steps have run.
    const bool voided = next && next->has_commit() && next->commit().accepted() < last_proposed_;
    int32_t budget = std::numeric_limits<int32_t>::max();
    if (voided) {
      budget = static_cast<int32_t>(schedule_ & 3) * 3;
      schedule_ = (schedule_ >> 2) | ((schedule_ << 6) & 0xFF);
    }
    if (!Steps(budget)) return false;
    ForwardSeq probe;
    if (voided && s_.NextStep(&probe)) s_.BeginAhead(0);
    return true;
  }

  // A `commit` request: the cache keeps a prefix of the committed sequence.
  bool Commit(const v1::Commit& c) {
    if (!s_.Commit(Verdict{c.round(), c.accepted(), c.next_token()}).ok()) return false;
    FUZZ_CHECK(s_.kv().length <= static_cast<int32_t>(s_.committed().size()) + kMaxRoundK + 1);
    return true;
  }

  // A `propose` request: the proposal must be one the target accepts.
  bool Propose(const v1::ProposeRequest& req) {
    if (!s_.BeginPropose(req.round(), req.k()).ok()) return false;
    FUZZ_CHECK(s_.kv().length <= static_cast<int32_t>(s_.committed().size()));
    if (!Steps(std::numeric_limits<int32_t>::max())) return false;
    const Proposal p = s_.TakeProposal();
    FUZZ_CHECK(static_cast<int32_t>(p.tokens.size()) <= req.k(), "%zu tokens for k = %d", p.tokens.size(), req.k());
    const absl::Status ok = TargetAccepts(p, config_.vocab);
    FUZZ_CHECK(ok.ok(), "the draft proposed what the target refuses: %s", std::string(ok.message()).c_str());
    CheckProposalRoundTrip(p);
    FUZZ_CHECK(s_.committed().size() + p.tokens.size() <= static_cast<size_t>(config_.n_ctx) + 1);
    last_proposed_ = static_cast<int32_t>(p.tokens.size());
    return true;
  }

 private:
  const Env& env_;
  const ModelConfig& config_;
  KvPool& pool_;
  DraftSession& s_;
  uint32_t schedule_;  // how many steps a voided ahead block runs: 2 bits per ahead
  int32_t last_proposed_ = 0;
};

void RunDraftStream(const uint8_t* data, size_t size) {
  if (size < 1) return;
  const Env& env = GetEnv();
  const ModelConfig& config = env.config;
  const std::vector<v1::DraftRequest> msgs = ParseStream<v1::DraftRequest>(data + 1, size - 1);
  if (msgs.empty() || !msgs[0].has_open()) return;
  KvPool pool(config.n_ctx / kBlockSize + 1, kBlockSize);
  {
    DraftSession s(pool, config);
    if (!OpenSession(msgs[0].open(), s, pool, config)) return;
    DraftStreamRun run(env, pool, s, data[0]);
    for (size_t i = 1; i < msgs.size() && s.open(); ++i) {
      const v1::DraftRequest& m = msgs[i];
      const bool ok = m.has_ahead()     ? run.Ahead(m, i + 1 < msgs.size() ? &msgs[i + 1] : nullptr)
                      : m.has_propose() ? run.Propose(m.propose())
                      : m.has_commit()  ? run.Commit(m.commit())
                                        : false;  // close, or a refused message
      if (!ok) break;
    }
  }
  FUZZ_CHECK(pool.free_blocks() == pool.num_blocks(), "a closed session kept %d KV blocks", pool.used_blocks());
}

void RunDraftResponse(const uint8_t* data, size_t size) {
  v1::DraftResponse resp;
  if (!resp.ParseFromArray(data, static_cast<int>(size)) || !resp.has_proposal()) return;
  auto p = rpc::ProposalFromProto(resp.proposal().tokens(), resp.proposal().dists());
  if (!p.ok()) return;
  FUZZ_CHECK(p->tokens.size() == static_cast<size_t>(resp.proposal().tokens_size()) &&
             p->dists.size() == p->tokens.size());
  for (size_t i = 0; i < p->dists.size(); ++i) {
    FUZZ_CHECK(p->dists[i].ids.size() == p->dists[i].probs.size() && !p->dists[i].ids.empty());
  }
  CheckProposalRoundTrip(*p);
  (void)TargetAccepts(*p, GetEnv().config.vocab);
}

void RunGenerateRequest(const uint8_t* data, size_t size) {
  v1::GenerateRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return;
  const Env& env = GetEnv();
  const CoordinatorOptions opts;
  for (const Tokenizer* tok : {env.spm.get(), env.bpe.get()}) {
    for (const bool draft_configured : {false, true}) {
      auto plan = PlanRequest(req, opts, *tok, env.config, draft_configured);
      if (!plan.ok()) continue;
      const SessionSpec& spec = plan->spec;
      FUZZ_CHECK(!spec.prompt.empty());
      if (req.has_token_ids()) {
        FUZZ_CHECK(std::equal(spec.prompt.begin(), spec.prompt.end(), req.token_ids().ids().begin(),
                              req.token_ids().ids().end()));
      }
      // The services run the same checks on what the coordinator sends.
      const SessionSpec sent = rpc::SpecFromProto(rpc::SpecToProto(spec));
      const absl::Status st = ValidateSessionSpec(sent, env.config);
      FUZZ_CHECK(st.ok(), "a planned request is refused by the services: %s", std::string(st.message()).c_str());
      CheckSpecRoundTrip(spec);
      FUZZ_CHECK(plan->drafter == v1::DRAFTER_MODEL || plan->drafter == v1::DRAFTER_NGRAM ||
                 plan->drafter == v1::DRAFTER_NONE);
      FUZZ_CHECK(plan->k.adaptive() || (plan->k.Next() >= 0 && plan->k.Next() <= KPolicy::kMax), "k %d",
                 plan->k.Next());
      FUZZ_CHECK(static_cast<int>(plan->stops.size()) <= opts.max_stop_strings);
      for (const std::string& stop : plan->stops) {
        FUZZ_CHECK(static_cast<int>(stop.size()) <= opts.max_stop_bytes);
      }
    }
  }
}

void RunModelInfo(const uint8_t* data, size_t size) {
  v1::ModelInfo info;
  if (!info.ParseFromArray(data, static_cast<int>(size))) return;
  auto tok = rpc::TokenizerFromInfo(info.tokenizer());
  if (!tok.ok()) return;
  const Tokenizer& t = **tok;
  const int32_t vocab = t.vocab_size();
  FUZZ_CHECK(vocab == info.tokenizer().pieces_size(), "vocab %d from %d pieces", vocab,
             info.tokenizer().pieces_size());
  for (TokenId id = 0; id < vocab; ++id) (void)t.TokenBytes(id);
  for (const char* text : {"def f(x):\n    return x  # \xC3\xA9\xE2\x86\x92", " <s></s><|eos|>\t", "\xFF\xC3"}) {
    const std::vector<TokenId> ids = t.Encode(text, true);
    for (TokenId id : ids) FUZZ_CHECK(id >= 0 && id < vocab, "id %d outside [0, %d)", id, vocab);
    (void)t.Decode(ids);
  }
  FUZZ_CHECK(CheckSameVocabulary(t, t).ok());
}

}  // namespace
}  // namespace specserve

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace specserve;
  (void)GetEnv();
  if (size < 1) return 0;
  const uint8_t* rest = data + 1;
  const size_t n = size - 1;
  switch (data[0] % 5) {
    case 0: RunTargetStream(rest, n); break;
    case 1: RunDraftStream(rest, n); break;
    case 2: RunDraftResponse(rest, n); break;
    case 3: RunGenerateRequest(rest, n); break;
    case 4: RunModelInfo(rest, n); break;
  }
  return 0;
}
