// The proto conversions between the wire and the engine (rpc/proto_convert.h):
// sparse distributions, proposals, session specs and the tokenizer carried in
// model info.
#include <cmath>

#include <gtest/gtest.h>

#include "common/spm_tokenizer.h"
#include "common/weights.h"
#include "rpc/proto_convert.h"
#include "tests/bundled_tokenizer.h"
#include "tests/test_paths.h"

namespace specserve {
namespace {

using testing::BundledTokenizer;

TEST(ProtoConvertTest, OneHotDistributionsTravelEmpty) {
  v1::SparseDist wire;
  rpc::DistToProto(SparseDist{{42}, {1.0f}}, 42, &wire);
  EXPECT_EQ(wire.ids_size(), 0);
  absl::StatusOr<SparseDist> back = rpc::DistFromProto(wire, 42);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->ids, std::vector<int32_t>{42});
  EXPECT_EQ(back->probs, std::vector<float>{1.0f});

  const SparseDist q{{3, 9, 1}, {0.5f, 0.3f, 0.2f}};
  rpc::DistToProto(q, 3, &wire);
  EXPECT_EQ(wire.ids_size(), 3);
  back = rpc::DistFromProto(wire, 3);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->ids, q.ids);
  EXPECT_EQ(back->probs, q.probs);

  wire.add_probs(0.1f);  // lengths differ
  EXPECT_EQ(rpc::DistFromProto(wire, 3).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ProtoConvertTest, ProposalCountsMustMatch) {
  Proposal p;
  p.tokens = {5, 6};
  p.dists = {SparseDist{{5}, {1.0f}}, SparseDist{{6, 7}, {0.75f, 0.25f}}};
  v1::VerifyRequest v;
  rpc::ProposalToProto(p, v.mutable_tokens(), v.mutable_dists());
  absl::StatusOr<Proposal> back = rpc::ProposalFromProto(v.tokens(), v.dists());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->tokens, p.tokens);
  EXPECT_EQ(back->dists[1].ids, p.dists[1].ids);
  v.add_tokens(8);
  EXPECT_EQ(rpc::ProposalFromProto(v.tokens(), v.dists()).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ProtoConvertTest, SessionSpecRoundTrips) {
  SessionSpec spec;
  spec.prompt = {1, 100, 200};
  spec.target = SamplingParams{0.7f, 40, 0.9f, 1234};
  spec.draft = DraftRule{0.5f, 16, 0.95f};
  spec.max_new_tokens = 77;
  SessionSpec back = rpc::SpecFromProto(rpc::SpecToProto(spec));
  EXPECT_EQ(back.prompt, spec.prompt);
  EXPECT_EQ(back.target.temperature, 0.7f);
  EXPECT_EQ(back.target.top_k, 40);
  EXPECT_EQ(back.target.top_p, 0.9f);
  EXPECT_EQ(back.target.seed, 1234u);
  EXPECT_EQ(back.draft.top_n, 16);
  EXPECT_EQ(back.draft.top_p, 0.95f);
  EXPECT_EQ(back.max_new_tokens, 77);
  EXPECT_FALSE(back.rules.active());
  spec.target.min_p = 0.05f;
  spec.rules.logit_bias = {{3, -100.0f}, {9, 2.5f}};
  spec.rules.presence_penalty = 0.5f;
  spec.rules.frequency_penalty = -0.25f;
  spec.rules.min_tokens = 4;
  spec.rules.ignore_eos = true;
  spec.rules.eos_ids = {2};
  spec.rules.stop_ids = {7, 8};
  back = rpc::SpecFromProto(rpc::SpecToProto(spec));
  EXPECT_EQ(back.target.min_p, 0.05f);
  EXPECT_EQ(back.rules.logit_bias, spec.rules.logit_bias);
  EXPECT_EQ(back.rules.presence_penalty, 0.5f);
  EXPECT_EQ(back.rules.frequency_penalty, -0.25f);
  EXPECT_EQ(back.rules.min_tokens, 4);
  EXPECT_TRUE(back.rules.ignore_eos);
  EXPECT_EQ(back.rules.eos_ids, spec.rules.eos_ids);
  EXPECT_EQ(back.rules.stop_ids, spec.rules.stop_ids);
  spec.rules.grammar = R"({"type": "object"})";
  back = rpc::SpecFromProto(rpc::SpecToProto(spec));
  EXPECT_EQ(back.rules.grammar, spec.rules.grammar);
  EXPECT_EQ(back.rules.filter, nullptr);  // each side compiles its own
  // An absent draft rule means the defaults, not zeros.
  v1::SessionOpen bare;
  bare.add_prompt(1);
  EXPECT_EQ(rpc::SpecFromProto(bare).draft.top_n, kDefaultDraftTopN);
  EXPECT_EQ(rpc::SpecFromProto(bare).draft.top_p, 1.0f);
}

TEST(ProtoConvertTest, TokenizerTravelsInModelInfo) {
  auto model = Model::Load(testing::BundledModel("code-target-7m.gguf"));
  ASSERT_TRUE(model.ok());
  absl::StatusOr<SpmVocab> vocab = ReadSpmVocab(*(*model)->file);
  ASSERT_TRUE(vocab.ok());
  v1::TokenizerInfo info = rpc::TokenizerInfoFromVocab(*vocab);
  absl::StatusOr<SpmVocab> back = rpc::VocabFromTokenizerInfo(info);
  ASSERT_TRUE(back.ok()) << back.status();
  auto remote = MakeSpmTokenizer(*back);
  ASSERT_TRUE(remote.ok());
  auto local = BundledTokenizer();
  EXPECT_TRUE(CheckSameVocabulary(**remote, *local).ok());
  const std::string text = "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n";
  EXPECT_EQ((*remote)->Encode(text, true), local->Encode(text, true));

  info.set_model("gpt2");
  EXPECT_EQ(rpc::VocabFromTokenizerInfo(info).status().code(), absl::StatusCode::kInvalidArgument);
  info.set_model("llama");
  info.add_scores(0);
  EXPECT_EQ(rpc::VocabFromTokenizerInfo(info).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ProtoConvertTest, ByteLevelBpeTokenizerTravelsToo) {
  auto model = Model::Load(testing::BundledModel("code-bpe-4m.gguf"));
  if (!model.ok()) SPECSERVE_MISSING_INPUT("code-bpe-4m.gguf");
  absl::StatusOr<v1::TokenizerInfo> info = rpc::TokenizerInfoFromGguf(*(*model)->file);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->model(), "gpt2");
  auto remote = rpc::TokenizerFromInfo(*info);
  ASSERT_TRUE(remote.ok()) << remote.status();
  auto local = Tokenizer::FromGguf(*(*model)->file);
  ASSERT_TRUE(local.ok());
  EXPECT_TRUE(CheckSameVocabulary(**remote, **local).ok());
  const std::string text = "for (int i = 0; i < 10; ++i) {\n  sum += a[i];  // ünïcödé\n}\n";
  EXPECT_EQ((*remote)->Encode(text, true), (*local)->Encode(text, true));
  // A SentencePiece target and this draft do not share a vocabulary.
  EXPECT_FALSE(CheckSameVocabulary(**remote, *BundledTokenizer()).ok());
}

TEST(ProtoConvertTest, TargetLoadTableRoundTripsAndBadTablesAreDropped) {
  TargetLoad load{true, 0.04, 0.007, 3, 5, {{1, 0.047}, {5, 0.056}, {17, 0.166}}};
  v1::TargetLoad wire;
  rpc::TargetLoadToProto(load, &wire);
  TargetLoad back = rpc::TargetLoadFromProto(wire);
  EXPECT_TRUE(back.known);
  EXPECT_EQ(back.fixed_seconds, 0.04);
  EXPECT_EQ(back.active_sessions, 5);
  ASSERT_EQ(back.passes.size(), 3u);
  EXPECT_EQ(back.passes[2].tokens, 17);
  EXPECT_EQ(back.passes[2].seconds, 0.166);
  EXPECT_EQ(back.tokens_per_session, 0.0);  // not set: an older target's report
  TargetLoad synced = load;
  synced.tokens_per_session = 1.25;
  synced.gather_seconds = 0.03;
  v1::TargetLoad synced_wire;
  rpc::TargetLoadToProto(synced, &synced_wire);
  back = rpc::TargetLoadFromProto(synced_wire);
  EXPECT_EQ(back.tokens_per_session, 1.25);
  EXPECT_EQ(back.gather_seconds, 0.03);
  // A negative or NaN figure reads as not reported.
  v1::TargetLoad odd = synced_wire;
  odd.set_tokens_per_session(-1);
  odd.set_gather_seconds(std::nan(""));
  back = rpc::TargetLoadFromProto(odd);
  EXPECT_EQ(back.tokens_per_session, 0.0);
  EXPECT_EQ(back.gather_seconds, 0.0);
  // Arrays of different lengths, widths out of order, a NaN: the table goes,
  // the line stays.
  v1::TargetLoad ragged = wire;
  ragged.add_pass_tokens(20);
  v1::TargetLoad unordered = wire;
  unordered.set_pass_tokens(2, 3);
  v1::TargetLoad nan = wire;
  nan.set_pass_seconds(0, std::nan(""));
  for (const v1::TargetLoad& bad : {ragged, unordered, nan}) {
    TargetLoad l = rpc::TargetLoadFromProto(bad);
    EXPECT_TRUE(l.passes.empty());
    EXPECT_EQ(l.seconds_per_token, 0.007);
  }
}

}  // namespace
}  // namespace specserve
