// The drafter registry (coordinator/drafter_registry.h): names, capabilities
// and factories; the public enum mapped onto it at the API edge only
// (coordinator/drafters.h); and prompt lookup as a pre-drafter in front of
// another drafter (coordinator/ngram_drafter.h): the drafter behind hears
// every committed token, in its own round numbering, and greedy output stays
// exactly plain decoding's.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/drafter_registry.h"
#include "coordinator/drafters.h"
#include "coordinator/local_engines.h"
#include "coordinator/ngram_drafter.h"
#include "coordinator/round_loop.h"
#include "tests/test_models.h"

namespace specserve {
namespace {

TEST(DrafterRegistry, NamesCapabilitiesAndIds) {
  const DrafterEntry* model = FindDrafter("model");
  const DrafterEntry* ngram = FindDrafter("ngram");
  ASSERT_TRUE(model && ngram);
  EXPECT_TRUE(model->caps.remote);
  EXPECT_TRUE(model->caps.drafts_ahead);
  EXPECT_FALSE(model->caps.needs_target_features);
  EXPECT_FALSE(ngram->caps.remote || ngram->caps.drafts_ahead || ngram->caps.needs_target_features);
  EXPECT_EQ(&FallbackDrafter(), ngram);
  EXPECT_EQ(FindDrafter("none"), nullptr);  // plain decoding is no drafter
  for (size_t i = 0; i < Drafters().size(); ++i) EXPECT_EQ(Drafters()[i].id, static_cast<int>(i));
}

TEST(DrafterRegistry, ThePublicEnumMapsOntoTheRegistryByName) {
  EXPECT_EQ(DrafterFor(v1::DRAFTER_MODEL), FindDrafter("model"));
  EXPECT_EQ(DrafterFor(v1::DRAFTER_NGRAM), FindDrafter("ngram"));
  EXPECT_EQ(DrafterFor(v1::DRAFTER_NONE), nullptr);
  // Every public drafter but "none" and "unspecified" is registered.
  const google::protobuf::EnumDescriptor* d = v1::Drafter_descriptor();
  for (int i = 0; i < d->value_count(); ++i) {
    const auto kind = static_cast<v1::Drafter>(d->value(i)->number());
    if (kind == v1::DRAFTER_NONE || kind == v1::DRAFTER_UNSPECIFIED) continue;
    EXPECT_NE(FindDrafter(DrafterName(kind)), nullptr) << DrafterName(kind);
  }
}

TEST(DrafterRegistry, TheFallbackStandsInWhereTheEnvironmentLacksWhatADrafterNeeds) {
  MadeDrafter none = MakeDrafter(nullptr, DrafterEnv{});
  EXPECT_FALSE(none.drafter || none.entry || none.stood_in);

  MadeDrafter missing = MakeDrafter(FindDrafter("model"), DrafterEnv{});  // no draft model reachable
  ASSERT_TRUE(missing.drafter);
  EXPECT_TRUE(missing.stood_in);
  EXPECT_EQ(missing.entry, &FallbackDrafter());
  EXPECT_EQ(missing.drafter->name(), "ngram");

  DrafterEnv unreachable;
  unreachable.draft_model = [] { return std::unique_ptr<Drafter>(); };  // the draft service's circuit is open
  EXPECT_TRUE(MakeDrafter(FindDrafter("model"), unreachable).stood_in);

  const DrafterEntry head{"head", {.needs_target_features = true},
                          [](const DrafterEnv&) -> std::unique_ptr<Drafter> { return std::make_unique<NgramDrafter>(); }};
  EXPECT_TRUE(MakeDrafter(&head, DrafterEnv{}).stood_in);
  DrafterEnv features;
  features.target_features = true;
  MadeDrafter made = MakeDrafter(&head, features);
  EXPECT_FALSE(made.stood_in);
  EXPECT_EQ(made.entry, &head);
}

// What a drafter behind the lookup hears: each commit (round, accepted,
// next token) and each proposal (round, k). It proposes 11, 12, ... .
struct Heard {
  bool commit;
  int64_t round;
  int32_t a, b;  // commit: accepted, next token; proposal: k, unused
  bool operator==(const Heard& o) const { return commit == o.commit && round == o.round && a == o.a && b == o.b; }
};

class Behind final : public Drafter {
 public:
  explicit Behind(std::vector<Heard>* heard) : heard_(heard) {}
  absl::Status Open(const SessionSpec&) override { return absl::OkStatus(); }
  absl::Status Commit(const Verdict& v) override {
    heard_->push_back({true, v.round, v.accepted, v.next_token});
    return absl::OkStatus();
  }
  absl::StatusOr<Proposal> Propose(int64_t round, int32_t k) override {
    heard_->push_back({false, round, k, 0});
    Proposal p;
    for (int32_t i = 0; i < k; ++i) {
      p.tokens.push_back(11 + i);
      p.dists.push_back(SparseDist{{11 + i}, {1.0f}});
    }
    return p;
  }
  void Close() override {}
  absl::string_view name() const override { return "behind"; }
  void PrepareAhead(int32_t k) override { heard_->push_back({false, -1, k, 0}); }

 private:
  std::vector<Heard>* heard_;
};

TEST(NgramPreDrafter, TheDrafterBehindHearsEveryCommittedTokenInItsOwnRounds) {
  std::vector<Heard> heard;
  NgramDrafter d(std::make_unique<Behind>(&heard), 4, 1);
  EXPECT_EQ(d.name(), "behind");
  SessionSpec spec;
  spec.prompt = {1, 5, 6, 7, 5, 6};  // "5 6" occurred before, followed by 7 5 6
  spec.max_new_tokens = 20;
  ASSERT_TRUE(d.Open(spec).ok());

  absl::StatusOr<Proposal> p = d.Propose(0, 3);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->tokens, (std::vector<TokenId>{7, 5, 6}));
  EXPECT_TRUE(p->looked_up);
  d.PrepareAhead(3);  // a looked-up block: nothing to draft ahead on
  EXPECT_TRUE(heard.empty());
  // Two accepted, then 9: the drafter behind hears 7, 5, 9 as three rounds with nothing proposed.
  ASSERT_TRUE(d.Commit({0, 2, 9}).ok());
  EXPECT_EQ(heard, (std::vector<Heard>{{true, 0, 0, 7}, {true, 1, 0, 5}, {true, 2, 0, 9}}));

  heard.clear();
  p = d.Propose(1, 2);  // "9" never occurred before: the drafter behind proposes, at its round 3
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->tokens, (std::vector<TokenId>{11, 12}));
  EXPECT_FALSE(p->looked_up);
  d.PrepareAhead(2);
  ASSERT_TRUE(d.Commit({1, 1, 13}).ok());
  EXPECT_EQ(heard, (std::vector<Heard>{{false, 3, 2, 0}, {false, -1, 2, 0}, {true, 3, 1, 13}}));

  heard.clear();
  ASSERT_TRUE(d.Commit({2, 0, 14}).ok());  // a plain round (K = 0): its token, one round behind
  EXPECT_EQ(heard, (std::vector<Heard>{{true, 4, 0, 14}}));
  EXPECT_EQ(d.Commit({2, 0, 14}).code(), absl::StatusCode::kFailedPrecondition);  // replayed: refused
  d.Close();
}

// Prompt lookup in front of the model drafter, in process: the rounds are
// looked up or the model's, and the greedy output is plain decoding's, with
// and without drafting ahead.
TEST(NgramPreDrafter, InFrontOfTheModelDrafterGreedyOutputIsPlainDecodings) {
  testing::LoadedModel target = testing::LoadModel(testing::ModelPath("code-target-7m"));
  testing::LoadedModel draft = testing::LoadModel(testing::ModelPath("code-draft-1m"));
  ASSERT_TRUE(target.backend && draft.backend);
  SessionSpec spec;
  spec.prompt = {1, 100, 200, 300, 400, 500, 100, 200, 300, 400, 500, 100, 200};
  spec.max_new_tokens = 48;
  const auto run = [&](Drafter* drafter, KPolicy k, bool overlap, std::vector<std::string>* labels) {
    LocalVerifier verifier(*target.backend);
    LoopOptions opts;
    opts.k = k;
    opts.overlap = overlap;
    std::vector<TokenId> out;
    opts.on_tokens = [&](absl::Span<const TokenId> ids) {
      out.insert(out.end(), ids.begin(), ids.end());
      return true;
    };
    opts.on_round = [&](const RoundRecord& r) {
      if (labels && r.drafted > 0) labels->push_back(r.drafter);
    };
    absl::StatusOr<LoopStats> st = RunSpeculative(spec, drafter, verifier, opts);
    EXPECT_TRUE(st.ok()) << st.status();
    EXPECT_EQ(st.ok() ? st->fallbacks : -1, 0);
    return out;
  };
  const std::vector<TokenId> plain = run(nullptr, KPolicy::Fixed(0), false, nullptr);
  ASSERT_EQ(plain.size(), 48u);
  for (bool overlap : {false, true}) {
    NgramDrafter front(std::make_unique<LocalDrafter>(*draft.backend), 6, 2);
    std::vector<std::string> labels;
    EXPECT_EQ(run(&front, KPolicy::Fixed(4), overlap, &labels), plain) << "overlap " << overlap;
    EXPECT_NE(std::find(labels.begin(), labels.end(), "lookup"), labels.end()) << "no looked-up round";
    EXPECT_NE(std::find(labels.begin(), labels.end(), "model"), labels.end()) << "no model round";
  }
}

}  // namespace
}  // namespace specserve
